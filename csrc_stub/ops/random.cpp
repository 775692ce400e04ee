// Random ops in the stub: the lend of a mydev generator to CPU's kernels, and
// `native_dropout`'s plain call without Python.
//
// mydev's generators are CPU's mt19937 (hooks.cpp). A random op runs CPU's kernel with a
// fresh CPU generator holding the mydev generator's state, which goes back to the mydev
// generator afterwards (torch_mydev/ops/fallback/random.py `lend`). One lock, the lend lock,
// covers each whole lend, Python's and the stub's alike (Python takes it through
// `_rng_lend_acquire`/`_rng_lend_release`, waiting without the GIL), so two random ops on one
// generator draw consecutive numbers, never the same ones.
//
// `native_dropout` has no generator argument, so the boxed fallback runs it in Python as
// CPU's `native_dropout_cpu` with the lent generator (random.py `_native_dropout`). Its plain
// call (a strided mydev input with storage, no lazy bit, in training, the C++ fallback's
// zero-copy path on) runs the same steps here: a bool mask laid out as the input, drawn by
// `bernoulli_(1 - p)`, `input * mask * (1 / (1 - p))` on a CPU alias of the input (the scale
// in the input's dtype, as CPU's kernel multiplies), both results
// adopted as mydev memory, counted under `aten::native_dropout`. Anything else goes to Python.
#include "../mydev.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <memory>
#include <mutex>

namespace mydev {
namespace {

std::recursive_mutex& lend_mutex() {
  static auto* m = new std::recursive_mutex();  // never destroyed: used at exit
  return *m;
}

// Copies one mt19937 generator's whole state (engine and cached normal samples) into another.
void copy_state(at::CPUGeneratorImpl& to, at::CPUGeneratorImpl& from) {
  to.set_engine(from.engine());
  to.set_next_float_normal_sample(from.next_float_normal_sample());
  to.set_next_double_normal_sample(from.next_double_normal_sample());
}

bool plain_dropout(c10::ArrayRef<c10::IValue> args) {
  if (!plain_calls_allowed() || !args[0].isTensor() || !args[1].isDouble()) {
    return false;
  }
  const at::Tensor& input = args[0].toTensor();
  const bool train = args[2].isNone() || (args[2].isBool() && args[2].toBool());
  return train && plain_mydev(input) && input.numel() > 0 &&
      at::isFloatingType(input.scalar_type());
}

void native_dropout_kernel(
    const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  c10::ArrayRef<c10::IValue> args = torch::jit::last(*stack, n);
  if (!plain_dropout(args)) {
    python_fallback(op, stack);
    return;
  }
  const at::Tensor input = args[0].toTensor();
  const double p1m = 1.0 - args[1].toDouble();
  const double scale = p1m == 0 ? 0.0 : 1.0 / p1m;  // as native_dropout_cpu
  const c10::DeviceIndex index = input.device().index();
  const at::Tensor alias = cpu_alias(input, std::nullopt, /*readonly=*/true);
  at::Tensor mask = at::empty_like(alias, alias.options().dtype(at::kBool));
  {
    std::lock_guard<std::recursive_mutex> lend(lend_mutex());
    at::Generator mine = default_generator(index);  // a new reference: mutex() is not const
    at::Generator lent = at::make_generator<at::CPUGeneratorImpl>();
    auto* mine_impl = static_cast<at::CPUGeneratorImpl*>(mine.unsafeGetGeneratorImpl());
    auto* lent_impl = lent.get<at::CPUGeneratorImpl>();
    {
      std::lock_guard<std::mutex> state(mine.mutex());
      copy_state(*lent_impl, *mine_impl);
    }
    mask.bernoulli_(p1m, lent);  // on error the mydev generator keeps its state, as Python's
    std::lock_guard<std::mutex> state(mine.mutex());
    copy_state(*mine_impl, *lent_impl);
  }
  at::Tensor output = alias.mul(mask).mul_(at::scalar_tensor(scale, alias.options()));
  at::Tensor results[2] = {as_mydev(output, index), as_mydev(mask, index)};
  count_fallback_call("aten::native_dropout");
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, std::move(results[0]), std::move(results[1]));
}

} // namespace

void init_random(pybind11::module& m) {
  m.def(
      "_rng_lend_acquire",
      [] {
        pybind11::gil_scoped_release no_gil;
        lend_mutex().lock();
      },
      "Take the lend lock (random.cpp), waiting without the GIL");
  m.def("_rng_lend_release", [] { lend_mutex().unlock(); }, "Release the lend lock");
  m.def(
      "_native_dropout_kernel",
      [] {
        aten_library().impl(
            "native_dropout", torch::CppFunction::makeFromBoxedFunction<&native_dropout_kernel>());
      },
      "Register the stub's native_dropout for PrivateUse1 (the Python fallback's on PrivateUse3)");
}

} // namespace mydev
