// The stub's one translation unit: every source of csrc_stub/, included in turn, is compiled
// once with the headers they share (ATen, pybind11, c10d). Compiled one by one, each source
// parsed those headers again: 96 s of compiling against 22 s here (docs/performance.md,
// "the stub's build"). The sources stay valid on their own; names in their anonymous
// namespaces must differ across files (tests/device/test_stub_sources.py checks this list).
#include "alias.cpp"
#include "allocator.cpp"
#include "backend_meta.cpp"
#include "c10d_backend.cpp"
#include "device.cpp"
#include "fallback.cpp"
#include "factories.cpp"
#include "guard.cpp"
#include "hooks.cpp"
#include "lazy_init.cpp"
#include "module.cpp"
#include "native_replay.cpp"
#include "numbers.cpp"
#include "pinned.cpp"
#include "profiler.cpp"
#include "random.cpp"
#include "replay.cpp"
#include "sdpa.cpp"
#include "views.cpp"
