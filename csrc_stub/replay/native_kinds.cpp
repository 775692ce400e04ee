// The C++ replay's kinds other than an elementwise loop (native_replay.h `Kind`): a fill (a
// copy from the value's bytes), a functional reduction, a clone and empty_like's layout.
// Each decides nothing: the record is what Python decided (ops/replay.py).
#include "native_replay.h"
#include "numbers.h"

#include <ATen/Parallel.h>

#include <optional>

namespace mydev {
namespace {

// The key words of a reduction's own arguments, as Python's head keeps them
// (ops/reduction/entries.py `served`): the dims as given (-1: None; else their count, then
// each), keepdim, dtype= (-1: None) and torch's thread count (the plan depends on it).
void reduction_words(
    LayoutKey& key,
    const std::optional<std::vector<int64_t>>& dims,
    bool keepdim,
    std::optional<c10::ScalarType> dtype) {
  if (dims.has_value()) {
    key.push_back(static_cast<int64_t>(dims->size()));
    for (const int64_t d : *dims) {
      key.push_back(d);
    }
  } else {
    key.push_back(-1);
  }
  key.push_back(keepdim ? 1 : 0);
  key.push_back(dtype.has_value() ? static_cast<int64_t>(*dtype) : -1);
  key.push_back(static_cast<int64_t>(at::get_num_threads()));
}

// The record of a new tensor made from `self` alone (clone, empty_like, _to_copy): `self`'s
// layout key and a memory format (argument `format_arg`: MemoryFormat's value, None as
// preserve_format, 1) standing where a number's position would (these ops have none), and
// `_to_copy`'s new dtype where a number's type would; null when there is none or Python
// must run (not a mydev tensor, a lazy bit, a copy-on-write storage).
std::shared_ptr<const NativeRecord> new_tensor_record(
    const NativeKernel& kernel,
    c10::ArrayRef<c10::IValue> args,
    size_t format_arg,
    const at::Tensor*& self,
    c10::ScalarType dtype = c10::ScalarType::Undefined) {
  self = mydev_self(args[0]);
  if (self == nullptr) {
    return nullptr;
  }
  int64_t format = static_cast<int64_t>(c10::MemoryFormat::Preserve);
  if (args.size() > format_arg && !args[format_arg].isNone()) {
    if (!args[format_arg].isInt()) {
      return nullptr;
    }
    format = args[format_arg].toInt();
  }
  int64_t flags_any = 0;
  LayoutKey key = self_key(*self, flags_any);
  if (flags_any != 0) {
    return nullptr;
  }
  key.push_back(key_word(dtype, format));
  return native_record(*kernel.table, key);
}

// `layout`, `device` and `pin_memory` (args[at] to args[at + 2]) that ask for nothing but
// `self`'s own: not given, strided, `self`'s device, pin_memory false.
bool own_options(c10::ArrayRef<c10::IValue> args, size_t at, const at::Tensor& self) {
  const c10::IValue& layout = args[at];
  const c10::IValue& device = args[at + 1];
  const c10::IValue& pin = args[at + 2];
  return (layout.isNone() ||
          (layout.isInt() && layout.toInt() == static_cast<int64_t>(c10::kStrided))) &&
      (device.isNone() || (device.isDevice() && device.toDevice() == self.device())) &&
      (pin.isNone() || (pin.isBool() && !pin.toBool()));
}

} // namespace

// A functional reduction: the recorded replica from `self` into a new output.
bool replay_reduce(const NativeKernel& kernel, c10::ArrayRef<c10::IValue> args, at::Tensor& out) {
  const at::Tensor* found_self = mydev_self(args[0]);
  if (found_self == nullptr) {
    return false;
  }
  const at::Tensor& self = *found_self;
  std::optional<std::vector<int64_t>> dims;
  bool keepdim = false;
  const c10::IValue* dtype_arg = nullptr;
  if (args.size() == 2) {  // sum / mean of every dim: (self, dtype)
    dtype_arg = &args[1];
  } else if (args.size() >= 3) {  // (self, dim, keepdim[, dtype])
    if (args[1].isIntList()) {
      dims = args[1].toIntVector();
    } else if (!args[1].isNone()) {
      return false;
    }
    if (!args[2].isBool()) {
      return false;
    }
    keepdim = args[2].toBool();
    if (args.size() == 4) {
      dtype_arg = &args[3];
    }
  }
  std::optional<c10::ScalarType> dtype;
  if (dtype_arg != nullptr && !dtype_arg->isNone()) {
    if (!dtype_arg->isInt()) {
      return false;
    }
    dtype = static_cast<c10::ScalarType>(dtype_arg->toInt());
  }
  int64_t flags_any = 0;
  LayoutKey key = self_key(self, flags_any);
  if (flags_any & (kFlagConj | kFlagNeg)) {
    return false;  // read only: a copy-on-write input is fine
  }
  key.push_back(key_word(c10::ScalarType::Undefined, 0));
  reduction_words(key, dims, keepdim, dtype);
  const auto record = native_record(*kernel.table, key);
  if (!record) {
    return false;
  }
  const uintptr_t start = first_byte(self);
  if (!reachable(self, start, record->extents[0], *record)) {
    return false;  // Python raises
  }
  out = empty_strided(record->sizes, record->strides, record->dtype, record->device);
  reinterpret_cast<Loop2>(record->entry)(
      static_cast<int64_t>(first_byte(out)),
      static_cast<int64_t>(start),
      0,
      reinterpret_cast<int64_t>(record->params.data()));
  return true;
}

// fill_.Scalar / zero_: the recorded copy loop from the value's bytes into `self`.
bool replay_fill(const NativeKernel& kernel, c10::ArrayRef<c10::IValue> args, at::Tensor& out) {
  const at::Tensor* found_self = mydev_self(args[0]);
  if (found_self == nullptr) {
    return false;
  }
  const at::Tensor& self = *found_self;
  Number number;
  number.type = c10::ScalarType::Long;  // zero_
  if (args.size() > 1) {
    auto found = number_of(args[1]);
    if (!found || args[1].isTensor()) {
      return false;
    }
    number = *found;
  }
  int64_t flags_any = 0;
  LayoutKey key = self_key(self, flags_any);
  if (flags_any != 0) {
    return false;  // a lazy bit, or copy-on-write: Python's path
  }
  key.push_back(key_word(number.type, 1));
  const auto record = native_record(*kernel.table, key);
  if (!record) {
    return false;
  }
  alignas(16) unsigned char constant[16] = {};
  if (!checked_number_bytes(number, record->constant_dtype, constant)) {
    return false;
  }
  const uintptr_t start = first_byte(self);
  if (!reachable(self, start, record->extents[0], *record)) {
    return false;
  }
  reinterpret_cast<Loop2>(record->entry)(
      static_cast<int64_t>(start),
      static_cast<int64_t>(reinterpret_cast<uintptr_t>(constant)),
      0,
      reinterpret_cast<int64_t>(record->params.data()));
  out = self;
  return true;
}

// empty_like(self, dtype, layout, device, pin_memory, memory_format) whose options are
// `self`'s own (or not given; pin_memory false): a new tensor with the strides Python's rule
// gave for this layout and format (ops/replay.py `record_empty_like`), filled as ATen's
// empty_like fills under deterministic algorithms.
bool replay_empty_like(
    const NativeKernel& kernel, c10::ArrayRef<c10::IValue> args, at::Tensor& out) {
  if (args.size() != 6) {
    return false;
  }
  const at::Tensor* self = nullptr;
  const auto record = new_tensor_record(kernel, args, 5, self);
  if (!record) {
    return false;
  }
  const bool own_dtype = args[1].isNone() ||
      (args[1].isInt() && args[1].toInt() == static_cast<int64_t>(self->scalar_type()));
  if (!own_dtype || !own_options(args, 2, *self)) {
    return false;
  }
  out = empty_strided(record->sizes, record->strides, record->dtype, record->device);
  fill_uninitialized(out);
  return true;
}

namespace {

// The recorded copy of `self` (its C entry: a same-dtype copy or a small contiguous cast)
// into a new tensor laid out as the record says.
bool copy_into_recorded(const NativeRecord& record, const at::Tensor& self, at::Tensor& out) {
  const uintptr_t start = first_byte(self);
  if (!reachable(self, start, record.extents[1], record)) {
    return false;
  }
  out = empty_strided(record.sizes, record.strides, record.dtype, record.device);
  reinterpret_cast<Loop2>(record.entry)(
      static_cast<int64_t>(first_byte(out)),  // a new block: 64-byte aligned, a unit's multiple
      static_cast<int64_t>(start),
      0,
      reinterpret_cast<int64_t>(record.params.data()));
  return true;
}

} // namespace

// clone(self, *, memory_format): a recorded same-dtype copy (ops/replay.py `record_clone`)
// into a new tensor laid out as the record says.
bool replay_clone(const NativeKernel& kernel, c10::ArrayRef<c10::IValue> args, at::Tensor& out) {
  const at::Tensor* self = nullptr;
  const auto record = new_tensor_record(kernel, args, 1, self);
  return record && copy_into_recorded(*record, *self, out);
}

// _to_copy(self, *, dtype, layout, device, pin_memory, non_blocking, memory_format) with a
// dtype given and the other options `self`'s own (or not given; pin_memory false): the
// recorded copy or cast into a new tensor (ops/replay.py `record_to_copy`). non_blocking
// changes nothing on one device.
bool replay_to_copy(const NativeKernel& kernel, c10::ArrayRef<c10::IValue> args, at::Tensor& out) {
  if (args.size() != 7 || !args[1].isInt()) {
    return false;
  }
  const at::Tensor* self = nullptr;
  const auto dtype = static_cast<c10::ScalarType>(args[1].toInt());
  const auto record = new_tensor_record(kernel, args, 6, self, dtype);
  return record && own_options(args, 2, *self) && copy_into_recorded(*record, *self, out);
}
} // namespace mydev
