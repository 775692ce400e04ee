// The scaled_dot_product_attention backend choice for mydev, as OpenReg registers it
// (csrc/aten/OpenRegExtra.cpp): the DispatchStub _fused_sdp_choice_stub, which the C++ body
// of aten::scaled_dot_product_attention asks for a PrivateUse1 query (attention.cpp
// handle_private_use), and the operator aten::_fused_sdp_choice. A DispatchStub can only be
// filled from C++; that is this file's first reason to exist. Its second: the plain calls of
// the OVERRIDEABLE forward and backward (4-dim mydev operands, no dropout, no bool mask, no
// bias gradient) run CPU's flash kernels here, on CPU aliases, as
// torch_mydev/ops/fallback/sdpa.py does in Python for every call it is sent.
//
// The rule: CPU's choice (its kernel, _fused_sdp_choice_cpp, which reads only sizes,
// strides, dtypes, requires_grad, dropout and the sdpa_kernel flags), with CPU's flash
// attention answered as OVERRIDEABLE. mydev's _scaled_dot_product_fused_attention_overrideable
// runs CPU's flash kernel (torch_mydev/ops/fallback_sdpa.py), so mydev computes what CPU
// computes for every input, and the math path (dropout, 3-dim inputs, a mask that needs a
// gradient) stays torch's composite, as on CPU. Under torch.vmap it is the math path too.

#include "../mydev.h"

#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/zeros.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <utility>

namespace mydev {
namespace {

int64_t fused_sdp_choice(
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask,
    double dropout_p,
    bool is_causal,
    std::optional<double> scale,
    bool enable_gqa) {
  const int64_t cpu = at::native::_fused_sdp_choice_cpp(
      query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  if (cpu != static_cast<int64_t>(at::SDPBackend::flash_attention)) {
    return cpu;
  }
  // Under torch.vmap the body runs on batched tensors, and functorch has no batching rule
  // for the overrideable op (it has one for CPU's flash op, whose name the body only calls
  // for CPU tensors): the math composite batches.
  const auto batched = [](const at::Tensor& t) {
    return t.key_set().has(c10::DispatchKey::FuncTorchBatched);
  };
  if (batched(query) || batched(key) || batched(value) ||
      (attn_mask.has_value() && attn_mask->defined() && batched(*attn_mask))) {
    return static_cast<int64_t>(at::SDPBackend::math);
  }
  return static_cast<int64_t>(at::SDPBackend::overrideable);
}

constexpr const char* kForward = "aten::_scaled_dot_product_fused_attention_overrideable";
constexpr const char* kBackward =
    "aten::_scaled_dot_product_fused_attention_overrideable_backward";

// A strided mydev tensor of `dims` dims on mydev:`index` (-1: the first one decides it), its
// bits as they are (no lazy conjugate or negation): what an operand of a plain call is.
bool plain_operand(const c10::IValue& v, int64_t dims, int64_t& index) {
  if (!v.isTensor()) {
    return false;
  }
  const at::Tensor& t = v.toTensor();
  if (!plain_mydev(t) || (dims >= 0 && t.dim() != dims)) {
    return false;
  }
  if (index < 0) {
    index = t.device().index();
  }
  return t.device().index() == index;
}

// No attention bias: None, or (the backward's `Tensor attn_bias`) an undefined tensor.
bool no_bias(const c10::IValue& v) {
  return v.isNone() || (v.isTensor() && !v.toTensor().defined());
}

// An attention bias: none, or a plain mydev operand that is not a bool mask (Python turns
// one into 0 / -inf first).
bool plain_bias(const c10::IValue& v, int64_t& index) {
  return no_bias(v) || (plain_operand(v, -1, index) && v.toTensor().scalar_type() != at::kBool);
}

at::Tensor read_only(const c10::IValue& v) {
  return cpu_alias(v.toTensor(), std::nullopt, /*readonly=*/true);
}

std::optional<at::Tensor> alias_of_bias(const c10::IValue& v) {
  if (no_bias(v)) {
    return std::nullopt;
  }
  return read_only(v);
}

// aten::_scaled_dot_product_fused_attention_overrideable(query, key, value, attn_bias,
// dropout_p, is_causal, return_debug_mask, *, scale): fallback/sdpa.py's
// `fused_attention_overrideable` for 4-dim operands without dropout, a debug mask or a bool
// mask; any other call, and one CPU's kernel refuses, goes to it.
void forward_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  c10::ArrayRef<c10::IValue> args = torch::jit::last(*stack, n);
  int64_t index = -1;
  const bool plain = n == 8 && plain_calls_allowed() && plain_operand(args[0], 4, index) &&
      plain_operand(args[1], 4, index) && plain_operand(args[2], 4, index) &&
      plain_bias(args[3], index) && args[4].isDouble() && args[4].toDouble() == 0.0 &&
      args[6].isBool() && !args[6].toBool();
  if (!plain) {
    python_fallback(op, stack);
    return;
  }
  const at::Tensor& query = args[0].toTensor();
  const at::Tensor& key = args[1].toTensor();
  at::Tensor output;
  at::Tensor logsumexp;
  try {
    std::tie(output, logsumexp) = at::_scaled_dot_product_flash_attention_for_cpu(
        read_only(args[0]), read_only(args[1]), read_only(args[2]), 0.0, args[5].toBool(),
        alias_of_bias(args[3]), args[7].toOptional<double>());
  } catch (const c10::Error&) {
    python_fallback(op, stack);  // Python runs it again and raises as CPU raises
    return;
  }
  // CPU's logsumexp is a (batch, seq, heads) buffer seen transposed; the meta function says
  // contiguous.
  logsumexp = logsumexp.contiguous();
  const c10::SymInt max_q = query.sym_size(2);
  const c10::SymInt max_k = key.sym_size(2);
  at::Tensor results[2] = {as_mydev(output, index), as_mydev(logsumexp, index)};
  count_fallback_call(kForward);
  torch::jit::drop(*stack, n);
  torch::jit::push(
      *stack,
      std::move(results[0]),
      std::move(results[1]),
      at::Tensor(),
      at::Tensor(),
      max_q,
      max_k,
      at::zeros({}, at::kLong),
      at::zeros({}, at::kLong),
      at::Tensor());
}

// A gradient of CPU's flash backward in its input's empty_like layout (a dense input: its
// own strides), as fallback/sdpa.py's `_like`; laid out on CPU, then adopted.
at::Tensor gradient_like(const at::Tensor& grad, const at::Tensor& input, int64_t index) {
  if (grad.strides() == input.strides()) {
    return as_mydev(grad, index);
  }
  const at::Tensor laid = at::empty_strided(input.sizes(), input.strides(), grad.options());
  return as_mydev(laid.copy_(grad), index);
}

// aten::_scaled_dot_product_fused_attention_overrideable_backward(grad_out, query, key,
// value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
// dropout_p, is_causal, philox_seed, philox_offset, *, scale): fallback/sdpa.py's
// `fused_attention_overrideable_backward` when only query, key or value gradients are asked
// for, of dense 4-dim operands, without dropout or a bool mask.
void backward_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  c10::ArrayRef<c10::IValue> args = torch::jit::last(*stack, n);
  int64_t index = -1;
  bool plain = n == 17 && plain_calls_allowed() && args[5].isBoolList() &&
      args[12].isDouble() && args[12].toDouble() == 0.0 && args[13].isBool();
  std::array<bool, 4> mask{};
  if (plain) {
    const c10::List<bool> asked = args[5].toBoolList();
    plain = asked.size() == 4 && !asked.get(3);
    for (size_t i = 0; plain && i < 3; ++i) {
      mask[i] = asked.get(i);
    }
    plain = plain && (mask[0] || mask[1] || mask[2]);
  }
  for (const size_t i : {0, 1, 2, 3, 6}) {
    plain = plain && plain_operand(args[i], 4, index);
  }
  plain = plain && plain_operand(args[7], -1, index) && plain_bias(args[4], index);
  for (const size_t i : {1, 2, 3}) {
    plain = plain && args[i].toTensor().is_non_overlapping_and_dense();
  }
  if (!plain) {
    python_fallback(op, stack);
    return;
  }
  at::Tensor grads[3];
  try {
    std::tie(grads[0], grads[1], grads[2]) =
        at::_scaled_dot_product_flash_attention_for_cpu_backward(
            read_only(args[0]),
            read_only(args[1]),
            read_only(args[2]),
            read_only(args[3]),
            read_only(args[6]),
            read_only(args[7]),
            0.0,
            args[13].toBool(),
            alias_of_bias(args[4]),
            args[16].toOptional<double>());
  } catch (const c10::Error&) {
    python_fallback(op, stack);
    return;
  }
  at::Tensor results[3];
  for (size_t i = 0; i < 3; ++i) {
    if (mask[i]) {
      results[i] = gradient_like(grads[i], args[i + 1].toTensor(), index);
    }
  }
  count_fallback_call(kBackward);
  torch::jit::drop(*stack, n);
  torch::jit::push(
      *stack, std::move(results[0]), std::move(results[1]), std::move(results[2]), at::Tensor());
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(fused_sdp_choice));
}

void init_sdpa(pybind11::module& m) {
  m.def(
      "_sdpa_kernels",
      [] {
        aten_library().impl(
            "_scaled_dot_product_fused_attention_overrideable",
            torch::CppFunction::makeFromBoxedFunction<&forward_kernel>());
        aten_library().impl(
            "_scaled_dot_product_fused_attention_overrideable_backward",
            torch::CppFunction::makeFromBoxedFunction<&backward_kernel>());
      },
      "Register the stub's OVERRIDEABLE attention kernels for PrivateUse1 (Python's are on "
      "PrivateUse3)");
}

} // namespace mydev

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &mydev::fused_sdp_choice)
} // namespace at::native
