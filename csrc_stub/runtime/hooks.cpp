// The PrivateUse1 hooks torch asks for (autograd, generators, devices, pinned memory,
// storage resize) and the default generators: CPU's mt19937 generator, one per device,
// reporting mydev:N as its device.
#include "../mydev.h"

#include <ATen/CPUGeneratorImpl.h>
// Its alignas(hardware_destructive_interference_size) warns under GCC; nothing of ours
// depends on that value.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winterference-size"
#include <ATen/core/CachingHostAllocator.h>
#pragma GCC diagnostic pop
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace mydev {
namespace {

class GeneratorImpl final : public at::CPUGeneratorImpl {
 public:
  explicit GeneratorImpl(c10::DeviceIndex index) {
    device_ = c10::Device(kDeviceType, index);
    key_set_ = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  }
};

struct Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override {
    return true;
  }

  bool isAvailable() const override {
    return true;
  }

  c10::DeviceIndex deviceCount() const override {
    return device_count();
  }

  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_device(device);
  }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    return exchange_device(device);
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }

  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::make_generator<GeneratorImpl>(resolve_device(index));
  }

  at::Device getDeviceFromPtr(void* data) const override {
    const c10::DeviceIndex index = device_of_block(data);
    TORCH_CHECK(index >= 0, "mydev: the pointer ", data, " is not mydev memory");
    return c10::Device(kDeviceType, index);
  }

  bool isPinnedPtr(const void* data) const override {
    return is_pinned(data);
  }

  c10::Allocator* getPinnedMemoryAllocator() const override {
    return at::getHostAllocator(kDeviceType);
  }

  bool hasPrimaryContext(c10::DeviceIndex index) const override {
    return index >= 0 && index < device_count();
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    // ATen's resize_bytes_cpu, on the storage's device (the allocator allocates on the
    // current one), except for size 0: there it leaves an empty DataPtr whose device is CPU,
    // and the storage then reported device "cpu" (FSDP1's shard() resizes to 0 and back).
    // Our allocator's allocate(0) gives a null pointer that keeps the device.
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    c10::Allocator* allocator = impl->allocator();
    TORCH_CHECK(allocator != nullptr, "Trying to resize storage without an allocator");
    const DeviceScope scope(storage.device().index());
    c10::DataPtr data = allocator->allocate(newsize);
    const size_t kept = std::min(newsize, impl->nbytes());
    if (kept > 0 && impl->data() != nullptr) {
      std::memcpy(data.get(), impl->data(), kept);
    }
    impl->set_data_ptr_noswap(std::move(data));
    impl->set_nbytes(newsize);
  }
};

// Registered at load time, before any tensor can ask for it.
const bool kHooksRegistered = [] {
  static Hooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  return true;
}();

} // namespace

const at::Generator& default_generator(c10::DeviceIndex index) {
  const c10::DeviceIndex device = resolve_device(index);
  // Seeded like CPU's default generator (default_rng_seed_val) until manual_seed.
  static const std::vector<at::Generator> generators = [] {
    std::vector<at::Generator> all;
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      all.push_back(at::make_generator<GeneratorImpl>(i));
    }
    return all;
  }();
  return generators[static_cast<size_t>(device)];
}

} // namespace mydev
