// The replay in front of the dispatcher: recorded elementwise calls without entering Python.
//
// `_replay` (replay.cpp) runs a call signature Python recorded, but only once the call has
// reached the op's Python kernel, and entering it costs about a microsecond: most of a small
// op. So for the ops whose records depend on the tensors' layouts and a number operand's
// type alone (add/sub/mul/div functional and in place, the six comparisons, neg, abs, relu:
// ops/replay.py NATIVE) the stub registers a C++ kernel on PrivateUse1
// (`_native_replay_kernel`) and Python's kernel on PrivateUse3, a backend key no tensor
// carries. The C++ kernel looks the call's key up in its op's table, and on a hit runs the
// loop as `_replay` does, into a new output or, in place, into `self`; anything else (an
// `alpha` it cannot convert as Python would, a lazy bit, no record, a storage too small for
// the layout, an in-place operand sharing self's storage) is redispatched to Python's
// kernel, which raises, plans or records. Python fills the tables as it answers repeats
// (torch_mydev/ops/replay.py `record`: `_native_replay_put`) and empties them with its own
// (`_native_replay_clear`).
//
// A call's key is the layout key of its tensors (replay.cpp `layout_key`, what Python's
// `_signature` reads) and one word: a Python number operand's type and position, and the
// default dtype (it decides an integer tensor with a float number, or an integer division).
// The number's value is not in the key: the record says which dtype the loop reads it in
// (`constant_dtype`); each call converts its own value there as `c10::convert` does. Nor is
// add's and sub's `alpha`: each call writes its value into a copy of the record's
// parameters (numbers.h `alpha_bytes`), where the record says (`alpha_word`).
//
// It decides nothing: a record is what Python decided (the output's layout, the loop and
// its parameters, the bytes each operand's storage must hold). Each record owns a copy of
// its parameters' block, so a table emptied while another thread runs one of its records
// frees nothing that call reads.
#include "native_replay.h"
#include "numbers.h"

#include <c10/core/DefaultDtype.h>
#include <c10/util/SmallVector.h>
#include <c10/util/TypeCast.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mydev {
namespace {

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

std::string key_string(const LayoutKey& key) {
  return std::string(reinterpret_cast<const char*>(key.data()), key.size() * sizeof(int64_t));
}

} // namespace

bool reachable(const at::Tensor& t, uintptr_t start, int64_t extent, const NativeRecord& record) {
  return storage_holds(t, start, extent) && start % static_cast<uintptr_t>(record.unit) == 0;
}

int64_t key_word(c10::ScalarType number, int64_t position) {
  const int64_t type = number == c10::ScalarType::Undefined ? 0 : 1 + static_cast<int64_t>(number);
  const int64_t default_dtype = static_cast<int64_t>(c10::get_default_dtype_as_scalartype());
  return type | (position << 8) | ((1 + default_dtype) << 16);
}

std::shared_ptr<const NativeRecord> native_record(NativeTable& table, const LayoutKey& key) {
  std::shared_lock<std::shared_mutex> lock(table.mutex);
  auto found = table.records.find(key_string(key));
  return found == table.records.end() ? nullptr : found->second;
}

const at::Tensor* mydev_self(const c10::IValue& arg) {
  if (!arg.isTensor() || !arg.toTensor().defined()) {
    return nullptr;
  }
  const at::Tensor& self = arg.toTensor();
  const bool ok = self.device().type() == kDeviceType && self.layout() == c10::kStrided &&
      self.has_storage();
  return ok ? &self : nullptr;
}

LayoutKey self_key(const at::Tensor& self, int64_t& flags_any) {
  const at::Tensor* tensors[1] = {&self};
  LayoutKey key;
  layout_key(tensors, 1, 2 + 2 * static_cast<size_t>(self.dim()), key, flags_any);
  return key;
}

namespace {

// Runs the recorded call on the stack's operands: true with `out` the result (a new tensor,
// or self in place), false when the call is not one this table can run.
bool replay_call(const NativeKernel& kernel, c10::ArrayRef<c10::IValue> args, at::Tensor& out) {
  if (kernel.kind == Kind::kClone) {
    return replay_clone(kernel, args, out);
  }
  if (kernel.kind == Kind::kToCopy) {
    return replay_to_copy(kernel, args, out);
  }
  if (kernel.kind == Kind::kEmptyLike) {
    return replay_empty_like(kernel, args, out);
  }
  if (kernel.kind == Kind::kFill) {
    return replay_fill(kernel, args, out);
  }
  if (kernel.kind == Kind::kReduce) {
    return replay_reduce(kernel, args, out);
  }
  const at::Tensor* tensors[2];
  size_t count = 0;
  size_t words = 0;
  Number number;
  int64_t number_position = 0;
  for (size_t i = 0; i < kernel.operands; ++i) {
    const c10::IValue& arg = args[i];
    if (arg.isTensor() && arg.toTensor().defined() &&
        arg.toTensor().device().type() == kDeviceType) {
      const at::Tensor& t = arg.toTensor();
      if (t.layout() != c10::kStrided || !t.has_storage()) {
        return false;
      }
      tensors[count++] = &t;
      words += 2 + 2 * static_cast<size_t>(t.dim());
      continue;
    }
    // A number: only one, never the operand an in-place call writes.
    if (number.type != c10::ScalarType::Undefined || (kernel.inplace && i == 0)) {
      return false;
    }
    auto found = number_of(arg);
    if (!found) {
      return false;
    }
    number = *found;
    number_position = static_cast<int64_t>(i);
  }
  if (count == 0) {
    return false;
  }
  if (kernel.inplace && count == 2 && tensors[0]->unsafeGetTensorImpl() !=
          tensors[1]->unsafeGetTensorImpl() &&
      tensors[0]->storage().data() == tensors[1]->storage().data()) {
    return false;  // an operand that is a view of self's storage: Copy.cpp's overlap rules
  }
  LayoutKey key;
  int64_t flags_any = 0;
  layout_key(tensors, count, words, key, flags_any);
  if (flags_any != 0) {
    return false;
  }
  key.push_back(key_word(number.type, number_position));
  const auto record = native_record(*kernel.table, key);
  if (!record) {
    return false;
  }
  // alpha's compute value, written into a copy of the parameters on this call's stack
  const int64_t* params = record->params.data();
  c10::SmallVector<int64_t, 64> with_alpha;
  if (kernel.alpha != 0) {
    if (record->alpha_word < 0) {
      if (!(args[2].isInt() && args[2].toInt() == 1)) {
        return false;
      }
    } else {
      with_alpha.assign(record->params.begin(), record->params.end());
      int64_t* word = &with_alpha[static_cast<size_t>(record->alpha_word)];
      if (!alpha_bytes(args[2], kernel.alpha, record->alpha_dtype, word)) {
        return false;
      }
      params = with_alpha.data();
    }
  }
  // The loop's operands in order; a number's are its bytes on this call's stack.
  alignas(16) unsigned char constant[16] = {};
  uintptr_t starts[2] = {0, 0};
  size_t next = 0;
  for (size_t i = 0; i < kernel.operands; ++i) {
    if (number.type != c10::ScalarType::Undefined && static_cast<int64_t>(i) == number_position) {
      if (!number_bytes(number, record->constant_dtype, constant)) {
        return false;
      }
      starts[i] = reinterpret_cast<uintptr_t>(constant);
      continue;
    }
    const at::Tensor& t = *tensors[next++];
    starts[i] = first_byte(t);
    if (!reachable(t, starts[i], record->extents[i], *record)) {
      return false;  // a storage smaller than the layout, or misaligned: Python raises
    }
  }
  uintptr_t target = starts[0];
  if (kernel.inplace) {
    out = *tensors[0];
  } else {
    out = empty_strided(record->sizes, record->strides, record->dtype, record->device);
    target = first_byte(out);
  }
  const int64_t status = reinterpret_cast<Loop2>(record->entry)(
      static_cast<int64_t>(target),
      static_cast<int64_t>(starts[0]),
      static_cast<int64_t>(kernel.operands == 2 ? starts[1] : starts[0]),
      reinterpret_cast<int64_t>(params));
  TORCH_CHECK(status == 0, "ZeroDivisionError");
  return true;
}

} // namespace

void NativeKernel::operator()(
    const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  at::Tensor out;
  if (!replay_call(*this, torch::jit::last(*stack, n), out)) {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse3), stack);
    return;
  }
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, std::move(out));
}

namespace {

c10::ScalarType dtype_or_undefined(const pybind11::object& dtype, const char* what) {
  if (dtype.is_none()) {
    return c10::ScalarType::Undefined;
  }
  TORCH_CHECK(THPDtype_Check(dtype.ptr()), what, " must be a torch.dtype or None");
  return reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
}

} // namespace

void init_native_replay(pybind11::module& m) {
  m.def(
      "_native_replay_kernel",
      [](const std::string& op,
         const std::string& table,
         int64_t operands,
         int64_t alpha,
         bool inplace,
         int64_t kind) {
        TORCH_CHECK(operands == 1 || operands == 2, "_native_replay_kernel: 1 or 2 operands");
        TORCH_CHECK(alpha >= -1 && alpha <= 1, "_native_replay_kernel: alpha -1, 0 or 1");
        TORCH_CHECK(kind >= 0 && kind <= 5, "_native_replay_kernel: kind 0 to 5");
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
                found,
                static_cast<size_t>(operands),
                static_cast<int>(alpha),
                inplace,
                static_cast<Kind>(kind))));
      },
      "Register the C++ replay of the table `table` as the PrivateUse1 kernel of the aten op "
      "`op` (its Python kernel on PrivateUse3): (op, table, operands, alpha: 1 add's, -1 "
      "sub's, 0 none, inplace, kind: "
      "0 elementwise, 1 fill, 2 reduction, 3 clone, 4 empty_like, 5 _to_copy)");
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
         int64_t extent1,
         pybind11::object number,
         int64_t position,
         pybind11::object constant_dtype,
         int64_t unit,
         pybind11::object reduction,
         int64_t alpha_word,
         pybind11::object alpha_dtype) {
        auto record = std::make_shared<NativeRecord>();
        record->sizes = std::move(sizes);
        record->strides = std::move(strides);
        record->dtype = dtype_or_undefined(dtype, "_native_replay_put: dtype");
        record->device = device;
        record->entry = entry;
        const std::string block = params;
        record->params.resize((block.size() + sizeof(int64_t) - 1) / sizeof(int64_t));
        std::memcpy(record->params.data(), block.data(), block.size());
        record->extents[0] = extent0;
        record->extents[1] = extent1;
        const c10::ScalarType number_type = dtype_or_undefined(number, "_native_replay_put: number");
        record->constant_dtype = dtype_or_undefined(constant_dtype, "_native_replay_put: constant");
        TORCH_CHECK(unit >= 1 && unit <= 16, "_native_replay_put: unit must be 1 to 16");
        record->unit = unit;
        const int64_t words_held = static_cast<int64_t>(record->params.size());
        TORCH_CHECK(
            alpha_word < 0 || alpha_word + 2 <= words_held,
            "_native_replay_put: alpha_word must leave two words in the block");
        record->alpha_word = alpha_word;
        record->alpha_dtype = dtype_or_undefined(alpha_dtype, "_native_replay_put: alpha_dtype");
        TORCH_CHECK(
            (number_type == c10::ScalarType::Undefined) ==
                (record->constant_dtype == c10::ScalarType::Undefined),
            "_native_replay_put: a number operand needs its constant dtype");
        const std::string layout = key;
        LayoutKey words(layout.size() / sizeof(int64_t));
        std::memcpy(words.data(), layout.data(), words.size() * sizeof(int64_t));
        words.push_back(key_word(number_type, position));
        if (!reduction.is_none()) {  // (dims or None, keepdim, dtype or None)
          auto parts = reduction.cast<pybind11::tuple>();
          std::optional<std::vector<int64_t>> dims;
          if (!parts[0].is_none()) {
            dims = parts[0].cast<std::vector<int64_t>>();
          }
          std::optional<c10::ScalarType> reduce_dtype;
          if (!parts[2].is_none()) {
            reduce_dtype = dtype_or_undefined(parts[2], "_native_replay_put: reduction dtype");
          }
          reduction_words(words, dims, parts[1].cast<bool>(), reduce_dtype);
        }
        NativeTable* found = table_named(table);
        std::unique_lock<std::shared_mutex> lock(found->mutex);
        if (found->records.size() >= kTableSize) {
          found->records.clear();
        }
        found->records[key_string(words)] = std::move(record);
      },
      "Record one call signature for the C++ replay: (table, layout key, sizes, strides, "
      "dtype, device, entry, params bytes, extent0, extent1, number dtype or None, the "
      "number's position (_to_copy: the new dtype and the memory format), the dtype the loop "
      "reads it as or None, unit, a reduction's "
      "(dims or None, keepdim, dtype or None) or None, the params word of add/sub's alpha "
      "or -1, the dtype whose compute type it is written in or None)",
      pybind11::arg("table"), pybind11::arg("key"), pybind11::arg("sizes"),
      pybind11::arg("strides"), pybind11::arg("dtype"), pybind11::arg("device"),
      pybind11::arg("entry"), pybind11::arg("params"), pybind11::arg("extent0"),
      pybind11::arg("extent1"), pybind11::arg("number"), pybind11::arg("position"),
      pybind11::arg("constant_dtype"), pybind11::arg("unit") = 1,
      pybind11::arg("reduction") = pybind11::none(),
      pybind11::arg("alpha_word") = -1,
      pybind11::arg("alpha_dtype") = pybind11::none());
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
