// The PrivateUse1 hooks torch asks for (autograd, generators, storage resize) and the
// default generator: CPU's mt19937 generator, reporting mydev as its device.
#include "mydev.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/native/Resize.h>

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
    return kDeviceCount;
  }

  c10::DeviceIndex getCurrentDevice() const override {
    return 0;
  }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    check_device_index(device);
  }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    check_device_index(device);
    return 0;
  }

  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }

  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    check_device_index(index);
    return at::make_generator<GeneratorImpl>(index < 0 ? 0 : index);
  }

  at::Device getDeviceFromPtr(void* /*data*/) const override {
    return c10::Device(kDeviceType, 0);
  }

  bool isPinnedPtr(const void* /*data*/) const override {
    return false;
  }

  c10::Allocator* getPinnedMemoryAllocator() const override {
    return c10::GetCPUAllocator();
  }

  bool hasPrimaryContext(c10::DeviceIndex index) const override {
    return index >= 0 && index < kDeviceCount;
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    // Storage bytes live in host memory from our allocator: ATen's CPU resize applies.
    at::native::resize_bytes_cpu(storage.unsafeGetStorageImpl(), newsize);
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
  check_device_index(index);
  // Seeded like CPU's default generator (default_rng_seed_val) until manual_seed.
  static at::Generator generator = at::make_generator<GeneratorImpl>(0);
  return generator;
}

} // namespace mydev
