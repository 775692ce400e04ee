// The C++ replay's records, tables and kernels (native_replay.cpp's head says what it is),
// shared by native_replay.cpp (the tables, the elementwise replay, the bindings) and
// native_kinds.cpp (the fill, reduction, clone and empty_like replays).
#pragma once

#include "../mydev.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mydev {

using Loop2 = int64_t (*)(int64_t, int64_t, int64_t, int64_t);

struct NativeRecord {
  std::vector<int64_t> sizes;  // the new output's layout (unused in place)
  std::vector<int64_t> strides;
  c10::ScalarType dtype;
  int64_t device;
  uintptr_t entry;
  std::vector<int64_t> params;  // a copy of the packed parameters' block
  int64_t extents[2];  // the bytes each operand's storage must hold from its first element
  c10::ScalarType constant_dtype;  // what the loop reads a number operand as
  int64_t unit = 1;  // what every start address must be a multiple of (a copy loop's unit)
  // add/sub: the word of `params` where the loop reads alpha's compute value, written per
  // call in the compute type of `alpha_dtype` (numbers.h `alpha_bytes`); -1: none.
  int64_t alpha_word = -1;
  c10::ScalarType alpha_dtype = c10::ScalarType::Undefined;
};

constexpr size_t kTableSize = 4096;  // as ops/replay.py TABLE_SIZE: a full table is emptied

struct NativeTable {
  std::shared_mutex mutex;
  std::unordered_map<std::string, std::shared_ptr<const NativeRecord>> records;
};

// What a kernel replays: an elementwise loop, a fill (a copy from the value's bytes), a
// functional reduction, a clone (a copy into a new tensor), or empty_like's layout
// (ops/replay.py NATIVE's last field).
enum class Kind : int64_t {
  kElementwise = 0,
  kFill = 1,
  kReduce = 2,
  kClone = 3,
  kEmptyLike = 4,
  kToCopy = 5,
};

struct NativeKernel : c10::OperatorKernel {
  NativeKernel(NativeTable* table, size_t operands, int alpha, bool inplace, Kind kind)
      : table(table), operands(operands), alpha(alpha), inplace(inplace), kind(kind) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack);

  NativeTable* table;
  size_t operands;  // the leading operands (tensors, at most one of them a number): 1 or 2
  int alpha;  // a third argument, alpha: add's (1), sub's (-1, the loop adds -alpha); 0: none
  bool inplace;  // the loop writes operand 0 (`self`), which is returned
  // kFill: fill_.Scalar / zero_ (operands 1: the value is argument 1, or 0), a recorded copy
  // loop from the value, converted with Scalar::to's overflow check, into `self`.
  // kReduce: sum/mean (.dim_IntList/.dim and all-dims), amax/amin: the dims, keepdim,
  // dtype= and torch's thread count are part of the key; the output is new.
  // kClone: clone (operands 1), its memory format in the key; the output is new.
  // kEmptyLike: empty_like whose options are self's own, its memory format in the key: a new
  // tensor with the strides Python's rule gave (no loop).
  Kind kind;
};

// Whether the loop may read or write `t` from `start` (its element 0): its storage holds the
// record's extent from there, and `start` is a multiple of the record's unit.
bool reachable(const at::Tensor& t, uintptr_t start, int64_t extent, const NativeRecord& record);

// The last word of a call's key: its number operand's type (0: none) and position, and the
// default dtype.
int64_t key_word(c10::ScalarType number, int64_t position);

// The record `table` holds under `key`, or null.
std::shared_ptr<const NativeRecord> native_record(NativeTable& table, const LayoutKey& key);

// The call's first argument as a strided mydev tensor with storage, or null.
const at::Tensor* mydev_self(const c10::IValue& arg);

// `self`'s layout key (replay.cpp `layout_key`) and its lazy bits.
LayoutKey self_key(const at::Tensor& self, int64_t& flags_any);

// The replays of the kinds other than kElementwise (native_kinds.cpp): true with `out` the
// result, false when Python must run the call.
bool replay_reduce(const NativeKernel& kernel, c10::ArrayRef<c10::IValue> args, at::Tensor& out);
bool replay_fill(const NativeKernel& kernel, c10::ArrayRef<c10::IValue> args, at::Tensor& out);
bool replay_empty_like(
    const NativeKernel& kernel, c10::ArrayRef<c10::IValue> args, at::Tensor& out);
bool replay_clone(const NativeKernel& kernel, c10::ArrayRef<c10::IValue> args, at::Tensor& out);
bool replay_to_copy(const NativeKernel& kernel, c10::ArrayRef<c10::IValue> args, at::Tensor& out);

} // namespace mydev
