// One plain call of the CPU fallback (fallback.cpp's head says which calls are plain): CPU
// aliases of its mydev tensors, the op run on CPU through the dispatcher, written arguments
// given back as themselves, new results adopted as mydev memory (alias.cpp).
#include "fallback.h"

#include <c10/core/impl/COW.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/utils/pybind.h>

#include <utility>

namespace mydev {
namespace {

// convolution_backward's `bias_sizes` for a convolution_backward_overrideable call (its
// arguments: grad_output, input, weight, stride, padding, dilation, transposed,
// output_padding, groups, output_mask), as boxed.py `convolution_backward_overrideable`
// makes it: one entry per output channel when the bias's gradient is asked for.
c10::IValue bias_sizes_of(c10::ArrayRef<c10::IValue> args) {
  if (!args[9].toBoolList().get(2)) {
    return c10::IValue();
  }
  const at::Tensor& weight = args[2].toTensor();
  const int64_t channels = args[6].toBool() ? weight.size(1) * args[8].toInt() : weight.size(0);
  return c10::IValue(std::vector<int64_t>{channels});
}

bool plain_number(const c10::IValue& v) {
  return v.isInt() || v.isDouble() || v.isBool() || v.isComplexDouble();
}

// Numbers, strings, None and lists of numbers (a SymInt[] argument arrives as a generic list).
bool plain_value(const c10::IValue& v) {
  if (v.isNone() || plain_number(v) || v.isString() || v.isIntList() || v.isDoubleList() ||
      v.isBoolList()) {
    return true;
  }
  if (!v.isList()) {
    return false;
  }
  for (const c10::IValue& item : v.toListRef()) {
    if (!plain_number(item)) {
      return false;
    }
  }
  return true;
}

// One call's CPU side: the aliases made so far, by mydev tensor and by storage.
struct Call {
  c10::DeviceIndex device = -1;
  c10::SmallVector<std::pair<const c10::TensorImpl*, at::Tensor>, 8> originals;  // alias -> mydev
  c10::SmallVector<std::pair<const c10::TensorImpl*, at::Tensor>, 8> seen;  // mydev -> alias
  c10::SmallVector<const c10::TensorImpl*, 4> passed;  // CPU tensors passed as they are

  // Whether `t` may take this path: a strided mydev tensor of the call's device (written:
  // not copy-on-write; an out= one may be empty: its alias grows, alias.cpp), or a 0-dim
  // CPU input (of any dims where the op allows CPU tensors: `cpu_allowed`).
  bool admits(const at::Tensor& t, bool written, bool cpu_allowed = false) {
    if (!t.defined()) {
      return !written;  // an absent optional tensor (an undefined one in the stack)
    }
    const c10::Device d = t.device();
    if (d.type() == kDeviceType) {
      if (t.layout() != c10::kStrided || !t.has_storage() || t.is_quantized() ||
          t.is_nested()) {
        return false;
      }
      if (device < 0) {
        device = d.index();
      } else if (d.index() != device) {
        return false;
      }
      if (written && c10::impl::cow::is_cow_data_ptr(t.storage().data_ptr())) {
        return false;
      }
      return true;
    }
    return d.is_cpu() && !written && (t.dim() == 0 || cpu_allowed);
  }

  at::Tensor to_cpu(const at::Tensor& t) {
    if (!t.defined()) {
      return t;
    }
    if (!t.device().is_cpu()) {
      const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
      for (const auto& [mydev, alias] : seen) {
        if (mydev == impl) {
          return alias;
        }
      }
      std::optional<at::Tensor> like;
      const void* data = t.storage().data();
      const size_t nbytes = t.storage().nbytes();
      for (const auto& [mydev, alias] : seen) {
        // Storages without bytes are told apart by identity: each may be grown on its own.
        if (data != nullptr && alias.storage().data() == data &&
            alias.storage().nbytes() == nbytes) {
          like = alias;
          break;
        }
      }
      at::Tensor alias = cpu_alias(t, like, /*readonly=*/true, /*growable=*/true);
      seen.emplace_back(impl, alias);
      originals.emplace_back(alias.unsafeGetTensorImpl(), t);
      return alias;
    }
    passed.push_back(t.unsafeGetTensorImpl());
    return t;
  }
};

// The CPU arguments of a plain call into `cpu`; false when the call is not plain.
bool make_cpu_arguments(
    const OpFacts& facts, c10::ArrayRef<c10::IValue> args, Call& call, torch::jit::Stack& cpu) {
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& v = args[i];
    const bool written = facts.written[i] != 0;
    const bool cpu_allowed = facts.cpu_allowed[i] != 0;
    if (v.isTensor()) {
      if (!call.admits(v.toTensor(), written, cpu_allowed)) {
        return false;
      }
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) {
        if (!call.admits(t, written)) {
          return false;
        }
      }
    } else if (v.isOptionalTensorList()) {  // index's `Tensor?[] indices`
      for (const std::optional<at::Tensor>& t : v.toOptionalTensorList().vec()) {
        if (t.has_value() && !call.admits(*t, written, cpu_allowed)) {
          return false;
        }
      }
    } else if (!plain_value(v)) {
      return false;
    }
  }
  cpu.reserve(args.size());
  for (const c10::IValue& v : args) {
    if (v.isTensor()) {
      cpu.emplace_back(call.to_cpu(v.toTensor()));
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : v.toTensorList().vec()) {
        list.push_back(call.to_cpu(t));
      }
      cpu.emplace_back(std::move(list));
    } else if (v.isOptionalTensorList()) {
      c10::List<std::optional<at::Tensor>> list;
      for (const std::optional<at::Tensor>& t : v.toOptionalTensorList().vec()) {
        list.push_back(t.has_value() ? std::optional<at::Tensor>(call.to_cpu(*t)) : std::nullopt);
      }
      cpu.emplace_back(std::move(list));
    } else {
      cpu.push_back(v);
    }
  }
  return true;
}

// A written mydev tensor whose alias the CPU op restrided is given the alias's layout by
// Python (`write_back`); an alias left as it was needs nothing.
void write_back(const at::Tensor& original, const Call& call) {
  if (!original.defined() || original.device().type() != kDeviceType) {
    return;
  }
  const at::Tensor* found = nullptr;
  for (const auto& [mydev, alias] : call.seen) {
    if (mydev == original.unsafeGetTensorImpl()) {
      found = &alias;
    }
  }
  const at::Tensor& alias = *found;
  if (original.sizes() == alias.sizes() && original.strides() == alias.strides() &&
      original.storage_offset() == alias.storage_offset()) {
    return;
  }
  pybind11::gil_scoped_acquire gil;
  pybind11::reinterpret_borrow<pybind11::object>(fallback_state().write_back)(original, alias);
}

using Moved = c10::SmallVector<std::pair<const c10::TensorImpl*, at::Tensor>, 4>;

// A CPU result as the mydev tensor the op returns (see the file's head).
at::Tensor to_mydev(at::Tensor value, const Call& call, Moved& moved) {
  if (!value.defined()) {
    return value;
  }
  const c10::TensorImpl* impl = value.unsafeGetTensorImpl();
  for (const auto& [alias, original] : call.originals) {
    if (alias == impl) {
      return original;
    }
  }
  if (!value.device().is_cpu()) {
    return value;
  }
  for (const auto& [cpu, mydev] : moved) {
    if (cpu == impl) {
      return mydev;
    }
  }
  const int64_t index = call.device >= 0 ? call.device : current_device();
  bool passed = false;
  for (const c10::TensorImpl* p : call.passed) {
    passed = passed || p == impl;
  }
  at::Tensor result;
  // A tensor Python holds (a Python kernel's cached table) is never taken.
  if (!passed && impl->pyobj_slot()->load_pyobj() == nullptr) {
    result = adopt_cpu_result(value, index);
  }
  if (!result.defined()) {
    pybind11::gil_scoped_acquire gil;
    result = pybind11::reinterpret_borrow<pybind11::object>(fallback_state().to_mydev)(value, index)
                 .cast<at::Tensor>();
  }
  moved.emplace_back(impl, result);
  return result;
}

} // namespace

bool run_plain(const c10::OperatorHandle& op, OpFacts& facts, torch::jit::Stack* stack) {
  if (!facts.fast || !plain_calls_allowed()) {
    return false;
  }
  const size_t n = op.schema().arguments().size();
  c10::ArrayRef<c10::IValue> args = torch::jit::last(*stack, n);
  Call call;
  torch::jit::Stack cpu;
  if (!make_cpu_arguments(facts, args, call, cpu)) {
    return false;
  }
  if (facts.bias_sizes) {
    cpu.insert(cpu.begin() + 3, bias_sizes_of(args));
  }
  try {
    (facts.target ? *facts.target : op).callBoxed(cpu);
  } catch (const c10::Error&) {
    return false;  // Python runs it again, and raises or recovers as it decides
  }
  for (size_t i = 0; i < n; ++i) {
    if (facts.written[i] == 0) {
      continue;
    }
    const c10::IValue& v = args[i];
    if (v.isTensor()) {
      write_back(v.toTensor(), call);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) {
        write_back(t, call);
      }
    }
  }
  facts.calls.fetch_add(1, std::memory_order_relaxed);
  Moved moved;
  c10::SmallVector<c10::IValue, 4> results;
  for (size_t r = 0; r < cpu.size(); ++r) {
    const int alias = r < facts.return_alias.size() ? facts.return_alias[r] : -1;
    if (alias >= 0) {
      results.push_back(args[static_cast<size_t>(alias)]);
      continue;
    }
    c10::IValue value = std::move(cpu[r]);
    if (value.isTensor()) {
      results.emplace_back(to_mydev(std::move(value).toTensor(), call, moved));
    } else if (value.isTensorList()) {
      std::vector<at::Tensor> items = std::move(value).toTensorList().vec();
      c10::List<at::Tensor> list;
      for (at::Tensor& t : items) {
        list.push_back(to_mydev(std::move(t), call, moved));
      }
      results.emplace_back(std::move(list));
    } else {
      results.push_back(std::move(value));
    }
  }
  torch::jit::drop(*stack, n);
  for (c10::IValue& value : results) {
    stack->push_back(std::move(value));
  }
  return true;
}

} // namespace mydev
