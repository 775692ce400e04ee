// aten::empty.memory_format and aten::empty_strided for PrivateUse1, in C++ as OpenReg and
// CUDA register them: every new mydev tensor that is not made by one of our Python kernels
// (composite ops, functional forms of out= ops, torch.empty itself) starts here, and a
// Python kernel cost about 3.5 µs more per tensor than this. The rules are ATen's own
// (at::detail::empty_generic / empty_strided_generic: negative sizes, memory formats and
// their ranks raise as on CPU); what is mydev's is the TensorOptions check and the device.
// Under torch.use_deterministic_algorithms(True) both fill the new memory as CPU's
// empty_cpu / empty_strided_cpu do (fill_uninitialized).
#include "../mydev.h"

#include <ATen/Context.h>
#include <ATen/EmptyTensor.h>
#include <ATen/native/TensorFactories.h>
#include <torch/library.h>

namespace mydev {

void fill_uninitialized(const at::Tensor& tensor) {
  const at::Context& context = at::globalContext();
  if (C10_UNLIKELY(
          context.deterministicAlgorithms() && context.deterministicFillUninitializedMemory())) {
    // CPU's own fill over the same bytes: CPU's bits for every dtype it fills, and its
    // error for a dtype it does not.
    at::Tensor alias = cpu_alias(tensor, std::nullopt);
    at::native::fill_empty_deterministic_(alias);
  }
}

namespace {

// The device index a factory allocates on (-1: the current device); an ordinal past the
// device count raises as torch.cuda does. Strided layout only; device memory is never pinned.
int64_t checked_index(
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory) {
  TORCH_CHECK(
      !layout.has_value() || *layout == c10::kStrided,
      "mydev supports only the strided layout, got ",
      *layout);
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned");
  return device.has_value() && device->has_index() ? device->index() : -1;
}

at::Tensor empty_memory_format(
    c10::IntArrayRef size,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory,
    std::optional<c10::MemoryFormat> memory_format) {
  const DeviceScope scope(resolve_device(checked_index(layout, device, pin_memory)));
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  at::Tensor result = at::detail::empty_generic(
      size, allocator(), keys, c10::dtype_or_default(dtype), memory_format);
  fill_uninitialized(result);
  return result;
}

at::Tensor empty_strided_op(
    c10::IntArrayRef size,
    c10::IntArrayRef stride,
    std::optional<c10::ScalarType> dtype,
    std::optional<c10::Layout> layout,
    std::optional<c10::Device> device,
    std::optional<bool> pin_memory) {
  const DeviceScope scope(resolve_device(checked_index(layout, device, pin_memory)));
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  at::Tensor result = at::detail::empty_strided_generic(
      size, stride, allocator(), keys, c10::dtype_or_default(dtype));
  fill_uninitialized(result);
  return result;
}

}  // namespace
}  // namespace mydev

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(mydev::empty_memory_format));
  m.impl("empty_strided", TORCH_FN(mydev::empty_strided_op));
}
