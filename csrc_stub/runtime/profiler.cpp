// Profiler stubs for PrivateUse1 (torch::profiler::impl::registerPrivateUse1Methods).
//
// torch's legacy / fallback profiler (ProfilerState::KINETO_PRIVATEUSE1_FALLBACK, chosen by
// torch.autograd.profiler.profile(use_device="mydev")) calls privateuse1Stubs()->record() on
// every op's enter and exit. Without a registration those are torch's DefaultStubs, whose
// record() throws "PrivateUse1 used in profiler but not enabled": RecordFunction catches it
// and prints a warning with a C++ stack trace per call (about 20 ms each), and the op's
// device interval is left half recorded. mydev kernels run synchronously on the host, so an
// "event" is the host time (c10::getTime, nanoseconds) at which it was recorded, and the
// device time between two events is the host time between them, in microseconds, as
// CUDAMethods::elapsed returns it (torch/csrc/profiler/stubs/cuda.cpp).
// Registered by a static initializer when torch_mydev._C loads: no binding needed.

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include <cstdint>
#include <functional>
#include <memory>

namespace {

using torch::profiler::impl::ProfilerStubs;
using torch::profiler::impl::ProfilerVoidEventStub;

const c10::impl::DeviceGuardImplInterface* guard() {
  return c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1);
}

struct MydevProfilerStubs final : public ProfilerStubs {
  void record(
      c10::DeviceIndex* device,
      ProfilerVoidEventStub* event,
      int64_t* cpu_ns) const override {
    if (device != nullptr) {
      *device = guard()->getDevice().index();
    }
    const int64_t now = c10::getTime();
    if (event != nullptr) {
      *event = std::make_shared<int64_t>(now);
    }
    if (cpu_ns != nullptr) {
      *cpu_ns = now;
    }
  }

  // Microseconds from `event` to `event2` (CUDA's stub returns cudaEventElapsedTime * 1000).
  float elapsed(const ProfilerVoidEventStub* event, const ProfilerVoidEventStub* event2)
      const override {
    TORCH_CHECK(
        event != nullptr && event2 != nullptr && *event && *event2,
        "mydev profiler: elapsed() of an event that was never recorded");
    const auto start = *static_cast<const int64_t*>(event->get());
    const auto end = *static_cast<const int64_t*>(event2->get());
    return static_cast<float>(static_cast<double>(end - start) / 1000.0);
  }

  // No external tracer to annotate (CUDA's push NVTX ranges).
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}

  bool enabled() const override {
    return true;
  }

  void onEachDevice(std::function<void(int)> op) const override {
    const auto count = guard()->deviceCount();
    for (c10::DeviceIndex i = 0; i < count; ++i) {
      c10::DeviceGuard device_guard(c10::Device(c10::DeviceType::PrivateUse1, i));
      op(i);
    }
  }

  // Kernels run synchronously: nothing is ever pending.
  void synchronize() const override {}
};

struct RegisterMydevProfilerStubs {
  RegisterMydevProfilerStubs() {
    static MydevProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};

const RegisterMydevProfilerStubs register_stubs;

} // namespace
