// Shared declarations of the mydev runtime: one host allocator with per-device statistics,
// TORCH_MYDEV_DEVICE_COUNT devices (default 2) with a current device and current streams
// per thread, pinned host memory, and the hooks torch asks a PrivateUse1 backend for.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <string>
#include <utility>

namespace torch {
class Library;
} // namespace torch

namespace mydev {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;
// Upper bound of TORCH_MYDEV_DEVICE_COUNT: per-device tables are fixed arrays of this size.
constexpr c10::DeviceIndex kMaxDevices = 16;
constexpr c10::DeviceIndex kDefaultDeviceCount = 2;
// Blocks of at least this many bytes are advised transparent huge pages (allocator.cpp).
constexpr size_t kHugePageMinBytes = size_t{4} << 20;

// --- devices (device.cpp) ---------------------------------------------------------------
// Number of devices: TORCH_MYDEV_DEVICE_COUNT read once, on first use (default 2).
c10::DeviceIndex device_count() noexcept;
// Why TORCH_MYDEV_DEVICE_COUNT was rejected, or "" when it is valid (the module's import
// raises with this message; device_count() is then 1).
const std::string& device_count_error();
// Raises the RuntimeError CUDA raises for a bad ordinal when `index` is not a mydev device
// (-1, "the current device", is accepted).
void check_device_index(int64_t index);
// `index`, or the current device when it is -1; checked.
c10::DeviceIndex resolve_device(int64_t index);
// The calling thread's current device (as cudaGetDevice, it is per thread).
c10::DeviceIndex current_device() noexcept;
void set_device(c10::DeviceIndex index);
// Sets the current device and returns the previous one.
c10::DeviceIndex exchange_device(c10::DeviceIndex index);

// Makes `index` the current device for one scope (the allocator allocates on it).
class DeviceScope {
 public:
  explicit DeviceScope(c10::DeviceIndex index) : previous_(exchange_device(index)) {}
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  c10::DeviceIndex previous_;
};

// --- device memory (allocator.cpp) ------------------------------------------------------
c10::DeviceAllocator* allocator();
c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex index);
void reset_peak_memory_stats(c10::DeviceIndex index);
void reset_accumulated_memory_stats(c10::DeviceIndex index);
// Frees the blocks kept for reuse on every device (torch.cuda.empty_cache's job).
void empty_cache();
// The device a live block from the allocator belongs to, or -1.
c10::DeviceIndex device_of_block(const void* ptr);
// A mydev DataPtr over `original`'s bytes (a block of CPU's allocator, `nbytes` long), counted
// as allocated on mydev:`index` until it is freed, then released through `original`'s deleter.
c10::DataPtr adopt_data(c10::DataPtr original, size_t nbytes, c10::DeviceIndex index);
// (free, total) bytes of host memory: MemAvailable / MemTotal of /proc/meminfo, else
// sysconf's available and physical pages.
std::pair<size_t, size_t> host_memory_info();

// --- pinned host memory (pinned.cpp) ----------------------------------------------------
// True when `ptr` points into a live block of the pinned host allocator.
bool is_pinned(const void* ptr);

// --- generators (hooks.cpp) -------------------------------------------------------------
const at::Generator& default_generator(c10::DeviceIndex index);

// The one allocation primitive: a strided tensor on mydev:`index` (-1: the current
// device), storage sized as ATen's computeStorageNbytes (overflow and negative sizes raise
// RuntimeError).
at::Tensor empty_strided(
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    c10::ScalarType dtype,
    int64_t index);

// A CPU tensor over the same bytes, sizes, strides, offset, dtype and conj/neg bits as the
// mydev tensor `tensor` (alias.cpp); with `like`, it shares that alias's CPU storage. A
// copy-on-write mydev storage is materialised first, unless `readonly`: then the alias is
// itself copy-on-write over the shared bytes (reading it materialises nothing).
at::Tensor cpu_alias(
    const at::Tensor& tensor,
    const std::optional<at::Tensor>& like,
    bool readonly = false,
    bool growable = false);

// Fills the new tensor `tensor` as ATen's empty_cpu does under
// torch.use_deterministic_algorithms(True) with fill_uninitialized_memory (NaN, or the
// dtype's largest value); nothing otherwise (factories.cpp).
void fill_uninitialized(const at::Tensor& tensor);

// Registered with Python's atexit (module.cpp): from then on an alias dying on any thread
// leaves its mydev storage to the process's end, and the releases already under way finish
// first, with the GIL free to be taken (alias.cpp).
void python_exit_guard();

// destroy(object), unless Python has begun to exit (python_exit_guard): then the object is
// left to the process's end. For what a thread Python does not know may drop last (gloo's
// worker) and whose release may need the GIL: tensors, storages.
void guarded_release(void* object, void (*destroy)(void*));

// Testing hooks (tests/device/test_alias_exit.py): a new native thread holds a CPU alias of
// `tensor` and drops it, as gloo's worker drops a finished collective's aliases, when
// drop_held_alias_now() (called with the GIL held) says so; that call returns once the
// thread has begun to drop it, 50 ms later, without letting go of the GIL meanwhile.
void hold_alias_on_a_native_thread(const at::Tensor& tensor);
void drop_held_alias_now();

// `tensor` (a CPU op's new result) moved to mydev:`index` without a copy when its storage is
// a block of CPU's allocator that nothing else holds (alias.cpp); else an undefined tensor.
// On success `tensor` is left with an empty storage.
at::Tensor adopt_cpu_result(const at::Tensor& tensor, int64_t index);

// Whether `t` is a strided mydev tensor with storage and no lazy conjugate or negative bit:
// an operand the stub's own kernels read through a CPU alias as it is (alias.cpp).
bool plain_mydev(const at::Tensor& t);

// The new CPU tensor `cpu` as a mydev:`index` tensor: adopted (no bytes move) when it can be,
// else a mydev tensor of its layout filled by copy_.
at::Tensor as_mydev(const at::Tensor& cpu, int64_t index);

// fallback.cpp: whether the C++ fallback may run plain calls (zero-copy on, no warning asked
// for); count a call the stub ran as a fallback under its fallback_stats name; send a call to
// the Python fallback (PrivateUse3).
bool plain_calls_allowed();
void count_fallback_call(const std::string& name);
void python_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// The aten IMPL library for PrivateUse1 in which the stub puts its C++ kernels in front of
// Python's (those on PrivateUse3); `_fallback_install` makes it.
torch::Library& aten_library();

// --- the replay key (replay.cpp) --------------------------------------------------------
// Flags of a layout key's tensors: a lazy conjugate or negative bit, a copy-on-write storage.
constexpr int64_t kFlagConj = 1;
constexpr int64_t kFlagNeg = 2;
constexpr int64_t kFlagCow = 4;
using LayoutKey = c10::SmallVector<int64_t, 64>;
// The words of `_signature`'s key of host strided tensors with storage `tensors[0..n)`
// (`words`: the sum of 2 + 2 * dim), their lazy bits ORed into `flags_any`.
// replay.cpp: the address of `t`'s element 0, and whether `t`'s storage holds `extent`
// bytes from `start` (that address).
uintptr_t first_byte(const at::Tensor& t);
bool storage_holds(const at::Tensor& t, uintptr_t start, int64_t extent);
void layout_key(
    const at::Tensor* const* tensors,
    size_t n,
    size_t words,
    LayoutKey& key,
    int64_t& flags_any);

} // namespace mydev
