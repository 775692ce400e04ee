// The stub's one translation unit: every source of csrc_stub/ and its folders, included in
// turn, is compiled once with the headers they share (ATen, pybind11, c10d). Compiled one by
// one, each source parsed those headers again: 96 s of compiling against 22 s here
// (docs/performance.md, "the stub's build"). The sources stay valid on their own; names in
// their anonymous namespaces must differ across files (tests/stub/test_stub_sources.py checks
// this list).
//
// The folders are the stub's layers: runtime/ (the device, its memory, guard, hooks,
// profiler), ops/ (kernels and the CPU fallback's C++ path), replay/ (recorded calls run
// without Python) and distributed/ (the c10d backend); module.cpp is the binding table.
#include "module.cpp"
#include "runtime/allocator.cpp"
#include "runtime/backend_meta.cpp"
#include "runtime/device.cpp"
#include "runtime/guard.cpp"
#include "runtime/hooks.cpp"
#include "runtime/lazy_init.cpp"
#include "runtime/pinned.cpp"
#include "runtime/profiler.cpp"
#include "ops/alias.cpp"
#include "ops/factories.cpp"
#include "ops/fallback.cpp"
#include "ops/plain_call.cpp"
#include "ops/random.cpp"
#include "ops/sdpa.cpp"
#include "ops/views.cpp"
#include "replay/native_kinds.cpp"
#include "replay/native_replay.cpp"
#include "replay/numbers.cpp"
#include "replay/replay.cpp"
#include "distributed/c10d_backend.cpp"
