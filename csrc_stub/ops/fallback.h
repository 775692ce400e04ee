// The CPU fallback's C++ path, shared by its two sources: fallback.cpp (what Python decided
// for each op, the C++ kernels on PrivateUse1, the bindings) and plain_call.cpp (one plain
// call: CPU aliases in, CPU's kernel, the results back as mydev tensors). See fallback.cpp's
// head for what a plain call is.
#pragma once

#include "../mydev.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <atomic>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace mydev {

// What Python decided for one op (`fast_path_facts`), with its calls counted here.
struct OpFacts {
  bool fast = false;
  std::string name;  // the fallback_stats key
  std::vector<uint8_t> written;  // per argument
  std::vector<uint8_t> cpu_allowed;  // per argument: CPU tensors of any dims pass as they are
  std::vector<int> return_alias;  // per return: the argument it is, or -1
  // The op whose CPU kernel runs instead (convolution_overrideable: aten::convolution), and
  // whether its arguments gain `bias_sizes` (convolution_backward_overrideable).
  std::optional<c10::OperatorHandle> target;
  bool bias_sizes = false;
  // A structured functional op's out= overload, which its generated composite calls: a
  // mydev kernel registered for it (a user's) takes the op's dense calls.
  std::optional<c10::OperatorHandle> out;
  std::atomic<int64_t> calls{0};
};

struct FallbackState {
  std::shared_mutex mutex;
  std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpFacts>> facts;
  // Python callables (kept for the process's life: a kernel may run at interpreter exit).
  PyObject* decide = nullptr;  // fast_path_facts(op) -> (name, written, ...) or None
  PyObject* to_mydev = nullptr;  // (cpu tensor, device index) -> mydev tensor
  PyObject* write_back = nullptr;  // (mydev tensor, cpu tensor) -> None
  std::atomic<bool> zero_copy{true};
  std::vector<std::unique_ptr<torch::Library>> libraries;
  // Calls of the stub's own fallback kernels (random.cpp), by fallback_stats name.
  std::unordered_map<std::string, std::unique_ptr<std::atomic<int64_t>>> named;
};

FallbackState& fallback_state();

// The facts of `op`, asked of Python the first time.
OpFacts& facts_of(const c10::OperatorHandle& op);

// Runs `op` on the stack's arguments when the call is plain; false (the stack untouched)
// when Python must run it.
bool run_plain(const c10::OperatorHandle& op, OpFacts& facts, torch::jit::Stack* stack);

} // namespace mydev
