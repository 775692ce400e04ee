// Devices: how many there are (TORCH_MYDEV_DEVICE_COUNT, read once) and which one each
// thread is on. As with CUDA, the current device is a property of the calling thread.
#include "../mydev.h"

#include <c10/util/Exception.h>

#include <cerrno>
#include <cstdlib>

namespace mydev {
namespace {

struct DeviceCount {
  c10::DeviceIndex count = kDefaultDeviceCount;
  std::string error;
};

DeviceCount parse_device_count() {
  DeviceCount result;
  const char* text = std::getenv("TORCH_MYDEV_DEVICE_COUNT");
  if (text == nullptr || *text == '\0') {
    return result;
  }
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || value < 1 || value > kMaxDevices) {
    result.count = 1;
    result.error = std::string("TORCH_MYDEV_DEVICE_COUNT must be an integer from 1 to ") +
        std::to_string(static_cast<int>(kMaxDevices)) + ", got '" + text + "'";
    return result;
  }
  result.count = static_cast<c10::DeviceIndex>(value);
  return result;
}

const DeviceCount& device_count_state() {
  static const DeviceCount state = parse_device_count();
  return state;
}

thread_local c10::DeviceIndex t_current_device = 0;

} // namespace

c10::DeviceIndex device_count() noexcept {
  return device_count_state().count;
}

const std::string& device_count_error() {
  return device_count_state().error;
}

void check_device_index(int64_t index) {
  TORCH_CHECK(
      index >= -1 && index < device_count(),
      "mydev error: invalid device ordinal ",
      index,
      " (mydev has ",
      static_cast<int>(device_count()),
      " devices)");
}

c10::DeviceIndex resolve_device(int64_t index) {
  check_device_index(index);
  return index < 0 ? t_current_device : static_cast<c10::DeviceIndex>(index);
}

c10::DeviceIndex current_device() noexcept {
  return t_current_device;
}

void set_device(c10::DeviceIndex index) {
  t_current_device = resolve_device(index);
}

c10::DeviceIndex exchange_device(c10::DeviceIndex index) {
  const c10::DeviceIndex previous = t_current_device;
  set_device(index);
  return previous;
}

DeviceScope::~DeviceScope() {
  t_current_device = previous_;
}

} // namespace mydev
