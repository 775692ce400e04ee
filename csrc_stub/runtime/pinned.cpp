// Pinned host memory for mydev (x.pin_memory(), DataLoader(pin_memory=True)): host blocks
// from our own allocator, 64-byte aligned, with their own statistics (torch.cuda's
// host_memory_stats names). Every block is host memory already, so "pinned" only marks which
// blocks came from here: is_pinned() answers by looking the pointer up. Copies from pinned
// memory run synchronously like every mydev copy; freed blocks are returned at once (there
// is no cache for empty_cache to release), and record_event has nothing to wait for.
#include "../mydev.h"

// Its alignas(hardware_destructive_interference_size) warns under GCC; nothing of ours
// depends on that value.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winterference-size"
#include <ATen/core/CachingHostAllocator.h>
#pragma GCC diagnostic pop
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

namespace mydev {
namespace {

constexpr size_t kPinnedAlignment = 64;

class PinnedRegistry {
 public:
  void add(void* ptr, size_t nbytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    blocks_.emplace(reinterpret_cast<uintptr_t>(ptr), nbytes);
    for (auto* stat : {&stats_.allocations, &stats_.active_requests}) {
      stat->increase(1);
    }
    for (auto* stat : {&stats_.allocated_bytes, &stats_.active_bytes}) {
      stat->increase(nbytes);
    }
    stats_.num_host_alloc += 1;
  }

  void remove(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(reinterpret_cast<uintptr_t>(ptr));
    TORCH_INTERNAL_ASSERT(it != blocks_.end(), "mydev: freeing an unknown pinned pointer");
    const size_t nbytes = it->second;
    blocks_.erase(it);
    for (auto* stat : {&stats_.allocations, &stats_.active_requests}) {
      stat->decrease(1);
    }
    for (auto* stat : {&stats_.allocated_bytes, &stats_.active_bytes}) {
      stat->decrease(nbytes);
    }
    stats_.num_host_free += 1;
  }

  // Whether `ptr` lies inside a live block (a pinned tensor may start past its block's
  // first byte, at a storage offset).
  bool contains(const void* ptr) {
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.upper_bound(address);
    if (it == blocks_.begin()) {
      return false;
    }
    it = std::prev(it);
    return address < it->first + it->second;
  }

  at::HostStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* stat : {&stats_.allocations,
                       &stats_.active_requests,
                       &stats_.allocated_bytes,
                       &stats_.active_bytes}) {
      stat->reset_peak();
    }
  }

  void reset_accumulated() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto* stat : {&stats_.allocations,
                       &stats_.active_requests,
                       &stats_.allocated_bytes,
                       &stats_.active_bytes}) {
      stat->reset_accumulated();
    }
    stats_.num_host_alloc = 0;
    stats_.num_host_free = 0;
  }

 private:
  std::mutex mutex_;
  std::map<uintptr_t, size_t> blocks_;
  at::HostStats stats_;
};

PinnedRegistry& pinned_registry() {
  // Leaked on purpose: pinned tensors may die after static destructors have run.
  static PinnedRegistry* instance = new PinnedRegistry();
  return *instance;
}

void free_pinned(void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  pinned_registry().remove(ptr);
  std::free(ptr);
}

class PinnedAllocator final : public at::HostAllocator {
 public:
  at::DataPtr allocate(size_t nbytes) override {
    // Pinned tensors are CPU tensors, as with CUDA.
    const c10::Device device(c10::DeviceType::CPU);
    if (nbytes == 0) {
      return {nullptr, nullptr, &free_pinned, device};
    }
    void* ptr = nullptr;
    const size_t rounded = (nbytes + kPinnedAlignment - 1) / kPinnedAlignment * kPinnedAlignment;
    TORCH_CHECK(
        rounded >= nbytes && posix_memalign(&ptr, kPinnedAlignment, rounded) == 0 && ptr != nullptr,
        "mydev: not enough pinned host memory: you tried to allocate ",
        nbytes,
        " bytes.");
    pinned_registry().add(ptr, nbytes);
    return {ptr, ptr, &free_pinned, device};
  }

  at::DeleterFnPtr raw_deleter() const override {
    return &free_pinned;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count != 0) {
      std::memcpy(dest, src, count);
    }
  }

  bool record_event(void* /*ptr*/, void* /*ctx*/, c10::Stream /*stream*/) override {
    return true;
  }

  void empty_cache() override {}

  at::HostStats get_stats() override {
    return pinned_registry().stats();
  }

  void reset_accumulated_stats() override {
    pinned_registry().reset_accumulated();
  }

  void reset_peak_stats() override {
    pinned_registry().reset_peak();
  }
};

PinnedAllocator g_pinned_allocator;

} // namespace

bool is_pinned(const void* ptr) {
  return ptr != nullptr && pinned_registry().contains(ptr);
}

} // namespace mydev

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &mydev::g_pinned_allocator);
