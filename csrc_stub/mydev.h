// Shared declarations of the mydev runtime: one host allocator with statistics,
// one device (index 0), and the hooks torch asks a PrivateUse1 backend for.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/Device.h>

#include <cstdint>

namespace mydev {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;
constexpr c10::DeviceIndex kDeviceCount = 1;
// Blocks of at least this many bytes are advised transparent huge pages (allocator.cpp).
constexpr size_t kHugePageMinBytes = size_t{4} << 20;

// Snapshot of the allocator's counters (names follow torch.cuda.memory_stats).
struct MemoryStats {
  int64_t allocated_bytes_current = 0;
  int64_t allocated_bytes_peak = 0;
  int64_t allocated_bytes_total = 0;
  int64_t freed_bytes_total = 0;
  int64_t blocks_current = 0;
  int64_t blocks_peak = 0;
  int64_t allocations_total = 0;
  int64_t frees_total = 0;
  int64_t cached_bytes_current = 0; // freed blocks kept for reuse
};

c10::Allocator* allocator();
MemoryStats memory_stats();
void reset_peak_memory_stats();
// Frees the blocks kept for reuse (torch.cuda.empty_cache's job).
void empty_cache();

// Raises the RuntimeError CUDA raises for a bad ordinal when `index` is not a mydev device.
void check_device_index(int64_t index);

const at::Generator& default_generator(c10::DeviceIndex index);

// The one allocation primitive: a strided tensor on mydev, storage sized as ATen's
// computeStorageNbytes (overflow and negative sizes raise RuntimeError).
at::Tensor empty_strided(
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    c10::ScalarType dtype,
    int64_t index);

// A CPU tensor over the same bytes, sizes, strides, offset, dtype and conj/neg bits as the
// mydev tensor `tensor` (alias.cpp); with `like`, it shares that alias's CPU storage.
at::Tensor cpu_alias(const at::Tensor& tensor, const std::optional<at::Tensor>& like);

} // namespace mydev
