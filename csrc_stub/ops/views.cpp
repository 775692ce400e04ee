// Metadata-only ops for PrivateUse1, bound to ATen's own native implementations: they
// change sizes, strides, offsets or storage and never move data. Everything else on mydev
// is registered from Python (torch_mydev/ops).
#include "../mydev.h"

#include <ATen/Context.h>
#include <ATen/native/Resize.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

namespace mydev {
namespace {

// aten::set_() gives `self` an empty storage; ATen's CPU version would take CPU's allocator.
at::Tensor& set_empty_(at::Tensor& self) {
  const DeviceScope scope(self.device().index());
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, allocator(), /*resizable=*/true);
  return at::native::set_storage_cpu_(self, std::move(storage), 0, {0}, {});
}

// ATen's CPU resize_ (native/Resize.cpp _resize_), step by step. It allocates from the
// storage's allocator, which allocates on the current device: make the tensor's device
// current, as CUDA's resize guards the tensor's device. Under deterministic algorithms the
// bytes it adds to the storage are filled as ATen fills them (fill_resize_deterministic_),
// by CPU's fill over an alias: every dtype CPU fills, with CPU's bits (ATen's own resize_
// would dispatch that fill_ to mydev, whose kernel lacks some dtypes).
const at::Tensor& resize_(
    const at::Tensor& self,
    c10::IntArrayRef size,
    std::optional<c10::MemoryFormat> memory_format) {
  const DeviceScope scope(self.device().index());
  c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  const int64_t old_nbytes =
      impl->unsafe_storage() ? static_cast<int64_t>(impl->unsafe_storage().nbytes()) : 0;
  at::native::resize_impl_cpu_(impl, size, /*stride=*/std::nullopt);
  if (memory_format.has_value()) {
    TORCH_CHECK(
        *memory_format != c10::MemoryFormat::Preserve,
        "Unsupported memory format",
        *memory_format);
    impl->empty_tensor_restride(*memory_format);
  }
  const at::Context& context = at::globalContext();
  if (C10_UNLIKELY(
          context.deterministicAlgorithms() && context.deterministicFillUninitializedMemory())) {
    at::native::fill_resize_deterministic_(cpu_alias(self, std::nullopt), old_nbytes);
  }
  return self;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("set_.source_Storage", TORCH_FN(at::native::set_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(at::native::set_storage_cpu_));
  m.impl("set_.source_Tensor", TORCH_FN(at::native::set_tensor_));
  m.impl("set_", TORCH_FN(set_empty_));
  // Host memory from our allocator: ATen's CPU resize (allocate, memcpy, free) applies.
  m.impl("resize_", TORCH_FN(resize_));
}

} // namespace mydev
