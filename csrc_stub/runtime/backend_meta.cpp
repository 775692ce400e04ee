// Backend metadata of mydev tensors: named flags a tensor carries beside its data, kept in
// TensorImpl's BackendMeta slot, as OpenReg's OpenRegBackendMeta (its
// runtime/OpenRegSerialization.cpp) and what its REGISTER_PRIVATEUSE1_SERIALIZATION wires up.
//
// torch._utils.set_tensor_metadata(t, {"name": bool, ...}) stores the flags of a mydev
// tensor (replacing any it had; "conj" and "neg" are torch's own bits and never reach us),
// get_tensor_metadata(t) reads them back. torch.save and pickle write them through
// Tensor._reduce_ex_internal (get_tensor_metadata) and load them through _rebuild_tensor_v2
// (set_tensor_metadata) for a tensor restored on mydev; one restored on CPU drops them, as the
// registry is per device type. TensorImpl copies the flags (clone below) wherever it copies
// its metadata: detach(), .data, shallow copies. Deepcopy and fake tensors are
// torch_mydev/_patches.py's (patch_deepcopy_backend_meta, patch_fake_tensor_backend_meta).
// Registered by a static initializer when torch_mydev._C loads: no binding needed.

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <map>
#include <string>
#include <unordered_map>
#include <utility>

namespace mydev {
namespace {

struct BackendMeta final : public c10::BackendMeta {
  explicit BackendMeta(std::map<std::string, bool> flags) : flags(std::move(flags)) {}

  // A copy of its own: flags set later on one tensor do not show on the other.
  c10::intrusive_ptr<c10::BackendMeta> clone(
      const c10::intrusive_ptr<c10::BackendMeta>& ptr) const override {
    return c10::make_intrusive<BackendMeta>(flags);
  }

  std::map<std::string, bool> flags;
};

// getTensorMetadata's hook: add the tensor's flags to `metadata`.
void get_flags(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  const auto* meta = dynamic_cast<const BackendMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
  if (meta == nullptr) {
    return;
  }
  for (const auto& [name, value] : meta->flags) {
    metadata[name] = value;
  }
}

// setTensorMetadata's hook: `metadata` (conj/neg already taken out) becomes the tensor's
// flags; an empty map removes them.
void set_flags(const at::Tensor& t, std::unordered_map<std::string, bool>& metadata) {
  c10::intrusive_ptr<c10::BackendMeta> meta;
  if (!metadata.empty()) {
    meta = c10::make_intrusive<BackendMeta>(
        std::map<std::string, bool>(metadata.begin(), metadata.end()));
  }
  t.unsafeGetTensorImpl()->set_backend_meta(std::move(meta));
}

const bool kRegistered = [] {
  torch::jit::TensorBackendMetaRegistry(c10::DeviceType::PrivateUse1, &get_flags, &set_flags);
  return true;
}();

} // namespace
} // namespace mydev
