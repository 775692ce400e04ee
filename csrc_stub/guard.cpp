// Device guard for mydev: a single device (index 0) with a single default stream.
#include "mydev.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

namespace mydev {

void check_device_index(int64_t index) {
  // -1 means "the current device", which is always mydev:0.
  TORCH_CHECK(
      index >= -1 && index < kDeviceCount,
      "mydev error: invalid device ordinal ",
      index,
      " (mydev has ",
      static_cast<int>(kDeviceCount),
      " device)");
}

namespace {

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kDeviceType;
  }

  c10::Device exchangeDevice(c10::Device device) const override {
    setDevice(device);
    return c10::Device(kDeviceType, 0);
  }

  c10::Device getDevice() const override {
    return c10::Device(kDeviceType, 0);
  }

  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kDeviceType, "mydev guard got a ", device, " device");
    check_device_index(device.index());
  }

  void uncheckedSetDevice(c10::Device /*device*/) const noexcept override {}

  c10::Stream getStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    return c10::Stream(c10::Stream::DEFAULT, stream.device());
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return kDeviceCount;
  }

  // Kernels run synchronously on the host, so events and streams are always complete.
  void record(
      void** /*event*/,
      const c10::Stream& /*stream*/,
      const c10::DeviceIndex /*device_index*/,
      const c10::EventFlag /*flag*/) const override {}

  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}

  bool queryEvent(void* /*event*/) const override {
    return true;
  }

  void destroyEvent(void* /*event*/, const c10::DeviceIndex /*device_index*/)
      const noexcept override {}

  bool queryStream(const c10::Stream& /*stream*/) const override {
    return true;
  }

  void synchronizeStream(const c10::Stream& /*stream*/) const override {}

  void synchronizeEvent(void* /*event*/) const override {}

  void synchronizeDevice(const c10::DeviceIndex /*device_index*/) const override {}
};

} // namespace
} // namespace mydev

C10_REGISTER_GUARD_IMPL(PrivateUse1, mydev::GuardImpl);
