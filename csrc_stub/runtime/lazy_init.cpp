// Fork poisoning of mydev, as torch::utils does it for CUDA and OpenReg
// (torch/csrc/utils/device_lazy_init.cpp).
//
// torch.mydev._lazy_init (torch_mydev/device_info.py) calls mydev::_register_fork_handler
// when mydev is first initialised: from then on a forked child starts "in bad fork"
// (torch::utils::set_device_in_bad_fork) and with PrivateUse1 needing initialisation again,
// so its first factory call on mydev calls torch.mydev._lazy_init, which raises as
// torch.cuda._lazy_init does. A child of a process that never initialised mydev is not
// poisoned. Bound as operators of the `mydev` namespace (torch.ops.mydev.*) rather than
// functions of torch_mydev._C, so that this file is all there is to it.

#include <torch/csrc/utils/device_lazy_init.h>
#include <torch/library.h>

namespace mydev {
namespace {

void register_fork_handler() {
  torch::utils::register_fork_handler_for_device_init(c10::DeviceType::PrivateUse1);
}

bool is_in_bad_fork() {
  return torch::utils::is_device_in_bad_fork(c10::DeviceType::PrivateUse1);
}

} // namespace

TORCH_LIBRARY_FRAGMENT(mydev, m) {
  m.def("_register_fork_handler() -> ()", &register_fork_handler);
  m.def("_is_in_bad_fork() -> bool", &is_in_bad_fork);
}

} // namespace mydev
