// The scaled_dot_product_attention backend choice for mydev, as OpenReg registers it
// (csrc/aten/OpenRegExtra.cpp): the DispatchStub _fused_sdp_choice_stub, which the C++ body
// of aten::scaled_dot_product_attention asks for a PrivateUse1 query (attention.cpp
// handle_private_use), and the operator aten::_fused_sdp_choice. A DispatchStub can only be
// filled from C++; that is this file's reason to exist.
//
// The rule: CPU's choice (its kernel, _fused_sdp_choice_cpp, which reads only sizes,
// strides, dtypes, requires_grad, dropout and the sdpa_kernel flags), with CPU's flash
// attention answered as OVERRIDEABLE. mydev's _scaled_dot_product_fused_attention_overrideable
// runs CPU's flash kernel (torch_mydev/ops/fallback_sdpa.py), so mydev computes what CPU
// computes for every input, and the math path (dropout, 3-dim inputs, a mask that needs a
// gradient) stays torch's composite, as on CPU. Under torch.vmap it is the math path too.

#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <torch/library.h>

#include <optional>

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

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", TORCH_FN(fused_sdp_choice));
}

} // namespace mydev

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &mydev::fused_sdp_choice)
} // namespace at::native
