// Device allocator for PrivateUse1: host memory, 64-byte aligned blocks, size 0 allowed,
// statistics per device. A block belongs to the device that was current when it was
// allocated (as CUDA's allocator allocates on the current device); empty_strided makes the
// requested device current for the allocation. Storage built on it is resizable, so out=
// variants can resize outputs. It derives from c10::DeviceAllocator, which is what
// torch.accelerator.memory_* and empty_cache ask the registered allocator for.
//
// Blocks of kHugePageMinBytes or more are aligned to 2 MiB and advised MADV_HUGEPAGE before
// anything touches them: their first write then takes one page fault per 2 MiB instead of
// one per 4 KiB (measured here: a new 64 MiB tensor filled by a copy in about half the
// time). c10's CPU allocator does the same when THP_MEM_ALLOC_ENABLE=1 is set; values and
// statistics are unaffected, and a system without transparent huge pages ignores the advice.
//
// Freed blocks of that size are kept for reuse by a later allocation of the same rounded
// size on the same device (as CUDA's caching allocator keeps blocks), up to
// kCacheLimitBytes in all: a new large tensor then starts on pages that are already mapped,
// instead of faulting every page in again (and, with huge pages, waiting for the kernel to
// compact memory). "allocated" counts live blocks only; "reserved" adds the kept ones;
// empty_cache() returns those.
//
// A block that CPU's allocator made for a CPU op's result can be adopted (adopt_data): the
// fallback hands it to a mydev tensor instead of copying it. It counts as allocated on its
// device while it lives, is never kept for reuse, and goes back through CPU's deleter. It
// keeps CPU's alignment (64 bytes) and pages, whatever its size: no huge-page advice.
//
// Kernels run synchronously on the calling thread, so a freed block is never still in use
// by a queued kernel: recordStream has nothing to do.
#include "../mydev.h"

#include <c10/util/Exception.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <vector>

#include <unistd.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace mydev {
namespace {

using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;

constexpr size_t kAlignment = 64;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kCacheLimitBytes = size_t{1} << 30;
// CUDA's caching allocator serves requests below 1 MiB from its small pool.
constexpr size_t kSmallSize = size_t{1} << 20;

constexpr size_t kAll = static_cast<size_t>(StatType::AGGREGATE);

size_t block_bytes(size_t nbytes) {
  const size_t alignment = nbytes >= kHugePageMinBytes ? kHugePage : kAlignment;
  return (nbytes + alignment - 1) / alignment * alignment;
}

size_t pool_of(size_t nbytes) {
  return static_cast<size_t>(nbytes < kSmallSize ? StatType::SMALL_POOL : StatType::LARGE_POOL);
}

// One device's counters and kept blocks.
struct DeviceState {
  StatArray allocation;
  StatArray allocated_bytes;
  StatArray reserved_bytes;
  StatArray segment;
  int64_t num_device_alloc = 0;
  int64_t num_device_free = 0;
  std::unordered_map<size_t, std::vector<void*>> cached;
  size_t cached_bytes = 0; // all kept blocks are large (>= kHugePageMinBytes)

  void allocated(size_t nbytes) {
    for (const size_t type : {kAll, pool_of(nbytes)}) {
      allocation[type].increase(1);
      allocated_bytes[type].increase(nbytes);
    }
  }

  void freed(size_t nbytes) {
    for (const size_t type : {kAll, pool_of(nbytes)}) {
      allocation[type].decrease(1);
      allocated_bytes[type].decrease(nbytes);
    }
  }

  // Reserved = live bytes + kept blocks, per pool; moved by the difference so that its
  // allocated/freed totals and peak follow.
  void update_reserved() {
    const size_t large = static_cast<size_t>(StatType::LARGE_POOL);
    const size_t small = static_cast<size_t>(StatType::SMALL_POOL);
    const int64_t target[3] = {
        allocated_bytes[kAll].current + static_cast<int64_t>(cached_bytes),
        allocated_bytes[small].current,
        allocated_bytes[large].current + static_cast<int64_t>(cached_bytes)};
    for (size_t type = 0; type < 3; ++type) {
      const int64_t delta = target[type] - reserved_bytes[type].current;
      if (delta > 0) {
        reserved_bytes[type].increase(static_cast<size_t>(delta));
      } else if (delta < 0) {
        reserved_bytes[type].decrease(static_cast<size_t>(-delta));
      }
    }
  }

  void segment_added(size_t nbytes) {
    num_device_alloc += 1;
    for (const size_t type : {kAll, pool_of(nbytes)}) {
      segment[type].increase(1);
    }
  }

  void segment_released(size_t nbytes) {
    num_device_free += 1;
    for (const size_t type : {kAll, pool_of(nbytes)}) {
      segment[type].decrease(1);
    }
  }
};

struct Block {
  size_t nbytes;
  c10::DeviceIndex device;
  bool adopted = false; // CPU's block (adopt_data): never kept, freed by its own deleter
};

class Registry {
 public:
  // A kept block of exactly block_bytes(nbytes) on `device`, or nullptr; counts it as
  // allocated.
  void* reuse(size_t nbytes, c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceState& state = devices_[device];
    auto it = state.cached.find(block_bytes(nbytes));
    if (it == state.cached.end() || it->second.empty()) {
      return nullptr;
    }
    void* ptr = it->second.back();
    it->second.pop_back();
    state.cached_bytes -= block_bytes(nbytes);
    add_locked(ptr, nbytes, device);
    return ptr;
  }

  // A block just obtained from the system (or, `adopted`, from CPU's allocator).
  void add(void* ptr, size_t nbytes, c10::DeviceIndex device, bool adopted = false) {
    std::lock_guard<std::mutex> lock(mutex_);
    devices_[device].segment_added(nbytes);
    add_locked(ptr, nbytes, device, adopted);
  }

  // Forgets a live block; `keep` is true when it is kept for reuse (else the caller frees it).
  struct Removed {
    bool keep;
    Block block;
  };
  Removed remove(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(ptr);
    TORCH_INTERNAL_ASSERT(it != blocks_.end(), "mydev: freeing an unknown pointer");
    const Block block = it->second;
    blocks_.erase(it);
    DeviceState& state = devices_[block.device];
    state.freed(block.nbytes);
    const size_t rounded = block_bytes(block.nbytes);
    const bool keep = !block.adopted && block.nbytes >= kHugePageMinBytes &&
        cached_total_locked() + rounded <= kCacheLimitBytes;
    if (keep) {
      state.cached[rounded].push_back(ptr);
      state.cached_bytes += rounded;
    } else {
      state.segment_released(block.nbytes);
    }
    state.update_reserved();
    return {keep, block};
  }

  // Takes every kept block of every device out of the cache, for the caller to free.
  std::vector<void*> take_cached() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<void*> blocks;
    for (DeviceState& state : devices_) {
      for (auto& entry : state.cached) {
        for (void* ptr : entry.second) {
          state.segment_released(entry.first);
          blocks.push_back(ptr);
        }
      }
      state.cached.clear();
      state.cached_bytes = 0;
      state.update_reserved();
    }
    return blocks;
  }

  c10::CachingDeviceAllocator::DeviceStats stats(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    const DeviceState& state = devices_[device];
    c10::CachingDeviceAllocator::DeviceStats stats;
    stats.allocation = state.allocation;
    stats.allocated_bytes = state.allocated_bytes;
    stats.reserved_bytes = state.reserved_bytes;
    stats.segment = state.segment;
    // Every live block is in use: active equals allocated, and nothing is split.
    stats.active = state.allocation;
    stats.active_bytes = state.allocated_bytes;
    stats.requested_bytes = state.allocated_bytes;
    stats.num_device_alloc = state.num_device_alloc;
    stats.num_device_free = state.num_device_free;
    return stats;
  }

  void reset_peak(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceState& state = devices_[device];
    for (StatArray* array :
         {&state.allocation, &state.allocated_bytes, &state.reserved_bytes, &state.segment}) {
      for (auto& stat : *array) {
        stat.reset_peak();
      }
    }
  }

  void reset_accumulated(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceState& state = devices_[device];
    for (StatArray* array :
         {&state.allocation, &state.allocated_bytes, &state.reserved_bytes, &state.segment}) {
      for (auto& stat : *array) {
        stat.reset_accumulated();
      }
    }
    state.num_device_alloc = 0;
    state.num_device_free = 0;
  }

  // The device of the live block holding `ptr` (its first byte or any later one), or -1.
  c10::DeviceIndex device_of_block(const void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(const_cast<void*>(ptr));
    if (it != blocks_.end()) {
      return it->second.device;
    }
    // An address inside a block (a view's data pointer): a scan, as this is rare (from_blob
    // without a device, DLPack) and the table is keyed for the allocation path.
    const auto address = reinterpret_cast<uintptr_t>(ptr);
    for (const auto& [start, block] : blocks_) {
      const auto first = reinterpret_cast<uintptr_t>(start);
      if (address >= first && address < first + block.nbytes) {
        return block.device;
      }
    }
    return -1;
  }

 private:
  void add_locked(void* ptr, size_t nbytes, c10::DeviceIndex device, bool adopted = false) {
    blocks_.emplace(ptr, Block{nbytes, device, adopted});
    DeviceState& state = devices_[device];
    state.allocated(nbytes);
    state.update_reserved();
  }

  size_t cached_total_locked() const {
    size_t total = 0;
    for (const DeviceState& state : devices_) {
      total += state.cached_bytes;
    }
    return total;
  }

  std::mutex mutex_;
  std::unordered_map<void*, Block> blocks_;
  std::array<DeviceState, kMaxDevices> devices_;
};

Registry& registry() {
  // Leaked on purpose: tensors may die after static destructors have run.
  static Registry* instance = new Registry();
  return *instance;
}

// An allocation (bytes > 0) or free (bytes < 0) as the profiler's memory events see it
// (profile_memory=True), with the device's totals after it, as CUDA's allocator reports.
void report_usage(void* ptr, int64_t bytes, c10::DeviceIndex device) {
  if (!c10::memoryProfilingEnabled()) {
    return;
  }
  const c10::CachingDeviceAllocator::DeviceStats stats = registry().stats(device);
  c10::reportMemoryUsageToProfiler(
      ptr,
      bytes,
      static_cast<size_t>(stats.allocated_bytes[kAll].current),
      static_cast<size_t>(stats.reserved_bytes[kAll].current),
      c10::Device(kDeviceType, device));
}

void free_block(void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  const Registry::Removed removed = registry().remove(ptr);
  report_usage(ptr, -static_cast<int64_t>(removed.block.nbytes), removed.block.device);
  if (!removed.keep) {
    std::free(ptr);
  }
}

// An adopted block: CPU's DataPtr, released (by CPU's deleter) when the mydev storage dies.
struct Adopted {
  c10::DataPtr original;
};

void free_adopted(void* ctx) {
  auto* adopted = static_cast<Adopted*>(ctx);
  void* ptr = adopted->original.get();
  const Registry::Removed removed = registry().remove(ptr);
  report_usage(ptr, -static_cast<int64_t>(removed.block.nbytes), removed.block.device);
  delete adopted;
}

class Allocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::DeviceIndex index = current_device();
    const c10::Device device(kDeviceType, index);
    if (nbytes == 0) {
      return {nullptr, nullptr, &free_block, device};
    }
    void* ptr = registry().reuse(nbytes, index);
    if (ptr != nullptr) {
      report_usage(ptr, static_cast<int64_t>(nbytes), index);
      return {ptr, ptr, &free_block, device};
    }
    const bool huge = nbytes >= kHugePageMinBytes;
    const size_t alignment = huge ? kHugePage : kAlignment;
    // Round up so the block size is a multiple of the alignment, as aligned_alloc wants.
    const size_t rounded = block_bytes(nbytes);
    TORCH_CHECK(
        rounded >= nbytes && posix_memalign(&ptr, alignment, rounded) == 0 && ptr != nullptr,
        "mydev: not enough memory: you tried to allocate ",
        nbytes,
        " bytes.");
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (huge) {
      madvise(ptr, rounded, MADV_HUGEPAGE); // advice only: a refusal changes nothing
    }
#endif
    registry().add(ptr, nbytes, index);
    report_usage(ptr, static_cast<int64_t>(nbytes), index);
    return {ptr, ptr, &free_block, device};
  }

  c10::DeleterFnPtr raw_deleter() const override {
    return &free_block;
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count != 0) {
      std::memcpy(dest, src, count);
    }
  }

  bool initialized() override {
    return true;
  }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    mydev::empty_cache();
  }

  void recordStream(const c10::DataPtr& /*ptr*/, c10::Stream /*stream*/) override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return device_stats(device);
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    reset_accumulated_memory_stats(device);
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    reset_peak_memory_stats(device);
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    check_device_index(device);
    return host_memory_info();
  }
};

Allocator g_allocator;

// A field of /proc/meminfo in bytes, or 0 when absent.
size_t meminfo_bytes(const std::string& text, const std::string& field) {
  const auto at = text.find(field + ":");
  if (at == std::string::npos) {
    return 0;
  }
  std::istringstream line(text.substr(at + field.size() + 1));
  size_t kib = 0;
  line >> kib;
  return kib * 1024;
}

} // namespace

c10::DeviceAllocator* allocator() {
  return &g_allocator;
}

c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex index) {
  return registry().stats(resolve_device(index));
}

void reset_peak_memory_stats(c10::DeviceIndex index) {
  registry().reset_peak(resolve_device(index));
}

void reset_accumulated_memory_stats(c10::DeviceIndex index) {
  registry().reset_accumulated(resolve_device(index));
}

void empty_cache() {
  for (void* ptr : registry().take_cached()) {
    std::free(ptr);
  }
}

c10::DeviceIndex device_of_block(const void* ptr) {
  return registry().device_of_block(ptr);
}

c10::DataPtr adopt_data(c10::DataPtr original, size_t nbytes, c10::DeviceIndex index) {
  void* ptr = original.get();
  TORCH_INTERNAL_ASSERT(ptr != nullptr && nbytes > 0, "mydev: adopting an empty block");
  registry().add(ptr, nbytes, index, /*adopted=*/true);
  report_usage(ptr, static_cast<int64_t>(nbytes), index);
  auto* adopted = new Adopted{std::move(original)};
  return {ptr, adopted, &free_adopted, c10::Device(kDeviceType, index)};
}

std::pair<size_t, size_t> host_memory_info() {
  std::ifstream file("/proc/meminfo");
  if (file) {
    std::stringstream buffer;
    buffer << file.rdbuf();
    const std::string text = buffer.str();
    const size_t total = meminfo_bytes(text, "MemTotal");
    const size_t available = meminfo_bytes(text, "MemAvailable");
    if (total != 0 && available != 0) {
      return {available, total};
    }
  }
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return {
      static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * page,
      static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * page};
}

} // namespace mydev

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &mydev::g_allocator);
