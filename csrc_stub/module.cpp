// torch_mydev._C: the Python bindings of the stub (allocation primitive, statistics,
// generator). Python-facing names start with an underscore; torch_mydev wraps them.
#include "mydev.h"

#include <ATen/EmptyTensor.h>
#include <torch/extension.h>

namespace mydev {

at::Tensor empty_strided(
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    c10::ScalarType dtype,
    int64_t index) {
  check_device_index(index);
  TORCH_CHECK(
      sizes.size() == strides.size(),
      "mydev empty_strided: got ",
      sizes.size(),
      " sizes but ",
      strides.size(),
      " strides");
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(sizes, strides, allocator(), keys, dtype);
}

namespace {

pybind11::dict stats_dict() {
  const MemoryStats s = memory_stats();
  pybind11::dict d;
  d["allocated_bytes.all.current"] = s.allocated_bytes_current;
  d["allocated_bytes.all.peak"] = s.allocated_bytes_peak;
  d["allocated_bytes.all.allocated"] = s.allocated_bytes_total;
  d["allocated_bytes.all.freed"] = s.freed_bytes_total;
  d["allocation.all.current"] = s.blocks_current;
  d["allocation.all.peak"] = s.blocks_peak;
  d["allocation.all.allocated"] = s.allocations_total;
  d["allocation.all.freed"] = s.frees_total;
  return d;
}

} // namespace
} // namespace mydev

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "mydev runtime stub: allocator statistics, allocation primitive, generator";
  m.def("_empty_strided", &mydev::empty_strided, "Allocate a strided tensor on mydev");
  m.def("_memory_stats", &mydev::stats_dict, "Allocator counters, torch.cuda names");
  m.def("_reset_peak_memory_stats", &mydev::reset_peak_memory_stats);
  m.def("_device_count", [] { return static_cast<int>(mydev::kDeviceCount); });
  m.def("_check_device", [](int64_t index) { mydev::check_device_index(index); });
  m.def("_default_generator", [](int64_t index) {
    mydev::check_device_index(index);
    return mydev::default_generator(static_cast<c10::DeviceIndex>(index));
  });
}
