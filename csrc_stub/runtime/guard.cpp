// Device guard for mydev: devices, streams and events.
//
// Semantics (docs/runtime.md): every mydev kernel runs synchronously on the calling thread,
// in submission order, so when control returns every stream is complete. Streams therefore
// only name an ordering that already holds: each thread has a current stream per device
// (stream 0, the default stream, until changed, as with CUDA), getNewStream hands out fresh
// ids, the global pool hands out kPoolSize ids round robin. An event records the host time
// (steady clock) at which it was recorded; elapsedTime is the real time between two records
// in milliseconds. Waiting, blocking and synchronizing have nothing left to wait for.
#include "../mydev.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <array>
#include <atomic>
#include <chrono>

namespace mydev {
namespace {

constexpr c10::StreamId kPoolSize = 32;
// Ids 1..kPoolSize are the pool's; new streams count on from there.
std::atomic<c10::StreamId> g_next_stream{kPoolSize + 1};
std::array<std::atomic<uint32_t>, kMaxDevices> g_pool_counters{};

thread_local std::array<c10::StreamId, kMaxDevices> t_current_stream{};

struct EventState {
  std::chrono::steady_clock::time_point time;
};

c10::Device device_or_current(c10::Device device) {
  return c10::Device(kDeviceType, resolve_device(device.index()));
}

struct GuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override {
    return kDeviceType;
  }

  c10::Device exchangeDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kDeviceType, "mydev guard got a ", device, " device");
    return c10::Device(kDeviceType, exchange_device(device.index()));
  }

  c10::Device getDevice() const override {
    return c10::Device(kDeviceType, current_device());
  }

  void setDevice(c10::Device device) const override {
    TORCH_CHECK(device.type() == kDeviceType, "mydev guard got a ", device, " device");
    set_device(device.index());
  }

  void uncheckedSetDevice(c10::Device device) const noexcept override {
    try {
      set_device(device.index());
    } catch (...) {
      // A guard restoring a device that was valid when it was saved cannot fail.
    }
  }

  c10::Stream getStream(c10::Device device) const override {
    device = device_or_current(device);
    return c10::Stream(
        c10::Stream::UNSAFE, device, t_current_stream[static_cast<size_t>(device.index())]);
  }

  c10::Stream getDefaultStream(c10::Device device) const override {
    return c10::Stream(c10::Stream::DEFAULT, device_or_current(device));
  }

  c10::Stream getStreamFromGlobalPool(c10::Device device, bool /*isHighPriority*/)
      const override {
    device = device_or_current(device);
    const auto n = g_pool_counters[static_cast<size_t>(device.index())]++;
    return c10::Stream(
        c10::Stream::UNSAFE, device, 1 + static_cast<c10::StreamId>(n % kPoolSize));
  }

  c10::Stream getNewStream(c10::Device device, int /*priority*/) const override {
    // Priorities order nothing when every kernel runs at once: accepted and ignored.
    return c10::Stream(c10::Stream::UNSAFE, device_or_current(device), g_next_stream++);
  }

  c10::Stream exchangeStream(c10::Stream stream) const override {
    const c10::Device device = device_or_current(stream.device());
    c10::StreamId& current = t_current_stream[static_cast<size_t>(device.index())];
    const c10::Stream previous(c10::Stream::UNSAFE, device, current);
    current = stream.id();
    return previous;
  }

  c10::DeviceIndex deviceCount() const noexcept override {
    return device_count();
  }

  // The dtypes mydev kernels handle (torch_mydev/kernels/dtypes.py SUPPORTED_DTYPES; a test
  // keeps the two lists equal): torch.accelerator.get_device_capability reports these.
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override {
    check_device_index(device.index());
    c10::DeviceCapability capability;
    capability.capability_data.capability_bits = 0;
    auto& types = capability.capability_data.supported_scalar_types;
    types.has_Bool = 1;
    types.has_Byte = 1;
    types.has_Char = 1;
    types.has_Short = 1;
    types.has_Int = 1;
    types.has_Long = 1;
    types.has_Half = 1;
    types.has_BFloat16 = 1;
    types.has_Float = 1;
    types.has_Double = 1;
    types.has_ComplexFloat = 1;
    types.has_ComplexDouble = 1;
    return capability;
  }

  void record(
      void** event,
      const c10::Stream& stream,
      const c10::DeviceIndex device_index,
      const c10::EventFlag /*flag*/) const override {
    TORCH_CHECK(
        device_index == -1 || device_index == stream.device_index(),
        "Event device index ",
        static_cast<int>(device_index),
        " does not match recording stream's device index ",
        static_cast<int>(stream.device_index()),
        ".");
    if (*event == nullptr) {
      *event = new EventState();
    }
    // Everything submitted to the stream before this call has already run.
    static_cast<EventState*>(*event)->time = std::chrono::steady_clock::now();
  }

  void block(void* /*event*/, const c10::Stream& /*stream*/) const override {}

  bool queryEvent(void* /*event*/) const override {
    return true;
  }

  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/)
      const noexcept override {
    delete static_cast<EventState*>(event);
  }

  bool queryStream(const c10::Stream& /*stream*/) const override {
    return true;
  }

  void synchronizeStream(const c10::Stream& /*stream*/) const override {}

  void synchronizeEvent(void* /*event*/) const override {}

  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    check_device_index(device_index);
  }

  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const c10::Stream& /*stream*/)
      const override {}

  double elapsedTime(void* event1, void* event2, const c10::DeviceIndex /*device_index*/)
      const override {
    TORCH_CHECK_VALUE(
        event1 != nullptr && event2 != nullptr,
        "Both events must be recorded before calculating elapsed time.");
    const auto start = static_cast<EventState*>(event1)->time;
    const auto end = static_cast<EventState*>(event2)->time;
    return std::chrono::duration<double, std::milli>(end - start).count();
  }
};

} // namespace
} // namespace mydev

C10_REGISTER_GUARD_IMPL(PrivateUse1, mydev::GuardImpl);
