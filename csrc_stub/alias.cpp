// CPU tensors over mydev memory. mydev memory is host memory, so a CPU tensor with the same
// sizes, strides, storage offset, dtype and lazy conjugate/negative bits over the same bytes
// reads and writes what the mydev tensor holds: the CPU fallback, gloo and inductor's CPU
// kernels work on such aliases with no copy. Metadata only: no layout rule lives here.
//
// The alias's storage is a CPU StorageImpl over the mydev bytes whose DataPtr context holds
// a reference to the mydev storage, so the bytes live as long as either tensor. It is not
// resizable: a CPU op that must grow it raises instead of moving mydev memory behind
// torch's back. Two aliases share one CPU storage only when the second is made with the
// first as `like`; aliasing and overlap checks (at::get_overlap_status) compare storages,
// so callers that alias several tensors of one mydev storage must pass `like`.
#include "mydev.h"

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

namespace mydev {
namespace {

void release_storage(void* ctx) {
  delete static_cast<c10::Storage*>(ctx);
}

c10::Storage cpu_storage_over(const c10::Storage& storage) {
  auto* keep = new c10::Storage(storage);
  c10::DataPtr data(
      storage.mutable_data(), keep, &release_storage, c10::Device(c10::DeviceType::CPU));
  return c10::Storage(
      c10::Storage::use_byte_size_t(),
      storage.nbytes(),
      std::move(data),
      /*allocator=*/nullptr,
      /*resizable=*/false);
}

} // namespace

at::Tensor cpu_alias(const at::Tensor& tensor, const std::optional<at::Tensor>& like) {
  TORCH_CHECK(
      tensor.defined() && tensor.device().type() == kDeviceType &&
          tensor.layout() == c10::kStrided && tensor.has_storage(),
      "_cpu_alias: expected a strided mydev tensor with storage, got ",
      tensor.defined() ? tensor.toString() : std::string("an undefined tensor"));
  const c10::Storage& storage = tensor.storage();
  c10::Storage cpu_storage;
  if (like.has_value() && like->defined()) {
    TORCH_CHECK(
        like->device().is_cpu() && like->has_storage() &&
            like->storage().data() == storage.data() &&
            like->storage().nbytes() == storage.nbytes(),
        "_cpu_alias: `like` must be a CPU alias of the same mydev storage");
    cpu_storage = like->storage();
  } else {
    cpu_storage = cpu_storage_over(storage);
  }
  at::Tensor alias = at::detail::make_tensor<c10::TensorImpl>(
      std::move(cpu_storage), c10::DispatchKeySet(c10::DispatchKey::CPU), tensor.dtype());
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(
      tensor.sizes(), tensor.strides(), tensor.storage_offset());
  alias._set_conj(tensor.is_conj());
  alias._set_neg(tensor.is_neg());
  return alias;
}

} // namespace mydev
