// The replay in front of the dispatcher: recorded elementwise calls without entering Python.
//
// `_replay` (replay.cpp) runs a call signature Python recorded, but only once the call has
// reached the op's Python kernel, and entering it costs about a microsecond: most of a small
// op. So for the ops whose records depend on the tensors' layouts alone (the functional
// `add.Tensor`, `sub.Tensor`, `mul.Tensor`, the six comparisons, `neg`, `abs`, `relu`) the
// stub registers a C++ kernel on PrivateUse1 (`_native_replay_kernel`) and Python's kernel on
// PrivateUse3, a backend key no tensor carries. The C++ kernel looks the call's layout key
// up in its op's table, and on a hit allocates the output and calls the loop as `_replay`
// does; anything else (a Python number, `alpha` other than 1, a lazy bit, no record, a
// storage too small for the layout) is redispatched to Python's kernel, which raises, plans
// or records. Python fills the tables as it fills its own (torch_mydev/ops/replay.py
// `record`: `_native_replay_put`) and empties them with its own (`_native_replay_clear`).
//
// It decides nothing: a record is what Python decided (the output's layout, the loop and
// its parameters, the bytes each operand's storage must hold). Each record owns a copy of
// its parameters' block, so a table emptied while another thread runs one of its records
// frees nothing that call reads.
#include "mydev.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mydev {
namespace {

using Loop2 = int64_t (*)(int64_t, int64_t, int64_t, int64_t);

struct NativeRecord {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  c10::ScalarType dtype;
  int64_t device;
  uintptr_t entry;
  std::vector<int64_t> params;  // a copy of the packed parameters' block
  int64_t extents[2];  // the bytes each operand's storage must hold from its first element
};

constexpr size_t kTableSize = 4096;  // as ops/replay.py TABLE_SIZE: a full table is emptied

struct NativeTable {
  std::shared_mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const NativeRecord>> records;
};

struct NativeKernel : c10::OperatorKernel {
  NativeKernel(NativeTable* table, size_t operands, bool alpha)
      : table(table), operands(operands), alpha(alpha) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack);

  NativeTable* table;
  size_t operands;  // the leading tensor arguments: 1 or 2
  bool alpha;  // a third argument that must be the integer 1
};

struct NativeReplayState {
  std::mutex mutex;  // guards `tables` (not their contents) and `library`
  std::unordered_map<std::string, std::unique_ptr<NativeTable>> tables;
  std::unique_ptr<torch::Library> library;
};

NativeReplayState& native_state() {
  static auto* s = new NativeReplayState();  // never destroyed: kernels may outlive statics
  return *s;
}

NativeTable* table_named(const std::string& name) {
  NativeReplayState& s = native_state();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto& table = s.tables[name];
  if (!table) {
    table = std::make_unique<NativeTable>();
  }
  return table.get();
}

uintptr_t first_byte(const at::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.storage().data()) +
      static_cast<uintptr_t>(t.storage_offset() * t.element_size());
}

bool storage_holds(const at::Tensor& t, uintptr_t start, int64_t extent) {
  const auto end = reinterpret_cast<uintptr_t>(t.storage().data()) + t.storage().nbytes();
  return extent >= 0 && end >= start && end - start >= static_cast<uintptr_t>(extent);
}

// The output of the recorded call on the stack's operands, or an undefined tensor when the
// call is not one this table can run.
at::Tensor replay_call(const NativeKernel& kernel, c10::ArrayRef<c10::IValue> args) {
  const at::Tensor* tensors[2];
  size_t words = 0;
  for (size_t i = 0; i < kernel.operands; ++i) {
    if (!args[i].isTensor()) {
      return {};
    }
    const at::Tensor& t = args[i].toTensor();
    if (!t.defined() || t.device().type() != kDeviceType || t.layout() != c10::kStrided ||
        !t.has_storage()) {
      return {};
    }
    tensors[i] = &t;
    words += 2 + 2 * static_cast<size_t>(t.dim());
  }
  if (kernel.alpha && !(args[2].isInt() && args[2].toInt() == 1)) {
    return {};
  }
  LayoutKey key;
  int64_t flags_any = 0;
  layout_key(tensors, kernel.operands, words, key, flags_any);
  if (flags_any != 0) {
    return {};
  }
  std::shared_ptr<const NativeRecord> record;
  {
    std::shared_lock<std::shared_mutex> lock(kernel.table->mutex);
    auto found = kernel.table->records.find(std::string(
        reinterpret_cast<const char*>(key.data()), key.size() * sizeof(int64_t)));
    if (found == kernel.table->records.end()) {
      return {};
    }
    record = found->second;
  }
  uintptr_t starts[2] = {0, 0};
  for (size_t i = 0; i < kernel.operands; ++i) {
    starts[i] = first_byte(*tensors[i]);
    if (!storage_holds(*tensors[i], starts[i], record->extents[i])) {
      return {};  // a storage smaller than the layout: Python raises
    }
  }
  at::Tensor out = empty_strided(record->sizes, record->strides, record->dtype, record->device);
  const int64_t status = reinterpret_cast<Loop2>(record->entry)(
      static_cast<int64_t>(first_byte(out)),
      static_cast<int64_t>(starts[0]),
      static_cast<int64_t>(kernel.operands == 2 ? starts[1] : starts[0]),
      reinterpret_cast<int64_t>(record->params.data()));
  TORCH_CHECK(status == 0, "ZeroDivisionError");
  return out;
}

void NativeKernel::operator()(
    const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  at::Tensor out = replay_call(*this, torch::jit::last(*stack, n));
  if (!out.defined()) {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse3), stack);
    return;
  }
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, std::move(out));
}

} // namespace

void init_native_replay(pybind11::module& m) {
  m.def(
      "_native_replay_kernel",
      [](const std::string& op, const std::string& table, int64_t operands, bool alpha) {
        TORCH_CHECK(operands == 1 || operands == 2, "_native_replay_kernel: 1 or 2 operands");
        NativeReplayState& s = native_state();
        NativeTable* found = table_named(table);
        std::lock_guard<std::mutex> lock(s.mutex);
        if (!s.library) {
          s.library = std::make_unique<torch::Library>(
              torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
        }
        s.library->impl(
            op.c_str(),
            torch::CppFunction::makeFromBoxedFunctor(std::make_unique<NativeKernel>(
                found, static_cast<size_t>(operands), alpha)));
      },
      "Register the C++ replay of the table `table` as the PrivateUse1 kernel of the aten op "
      "`op` (its Python kernel on PrivateUse3): (op, table, operands, alpha)");
  m.def(
      "_native_replay_put",
      [](const std::string& table,
         pybind11::bytes key,
         std::vector<int64_t> sizes,
         std::vector<int64_t> strides,
         pybind11::object dtype,
         int64_t device,
         uintptr_t entry,
         pybind11::bytes params,
         int64_t extent0,
         int64_t extent1) {
        TORCH_CHECK(THPDtype_Check(dtype.ptr()), "_native_replay_put: dtype must be a torch.dtype");
        auto record = std::make_shared<NativeRecord>();
        record->sizes = std::move(sizes);
        record->strides = std::move(strides);
        record->dtype = reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
        record->device = device;
        record->entry = entry;
        const std::string block = params;
        record->params.resize((block.size() + sizeof(int64_t) - 1) / sizeof(int64_t));
        std::memcpy(record->params.data(), block.data(), block.size());
        record->extents[0] = extent0;
        record->extents[1] = extent1;
        NativeTable* found = table_named(table);
        std::unique_lock<std::shared_mutex> lock(found->mutex);
        if (found->records.size() >= kTableSize) {
          found->records.clear();
        }
        found->records[std::string(key)] = std::move(record);
      },
      "Record one call signature for the C++ replay: (table, key, sizes, strides, dtype, "
      "device, entry, params bytes, extent0, extent1)");
  m.def(
      "_native_replay_clear",
      [] {
        NativeReplayState& s = native_state();
        std::lock_guard<std::mutex> lock(s.mutex);
        for (auto& [_, table] : s.tables) {
          std::unique_lock<std::shared_mutex> table_lock(table->mutex);
          table->records.clear();
        }
      },
      "Forget every record of the C++ replay");
  m.def(
      "_native_replay_size",
      [](const std::string& table) {
        NativeTable* found = table_named(table);
        std::shared_lock<std::shared_mutex> lock(found->mutex);
        return found->records.size();
      },
      "How many records the C++ replay holds for `table`");
}

} // namespace mydev
