// The CPU fallback's common case without Python (torch_mydev/ops/fallback/boxed.py).
//
// Python registers its fallback and its per-op fallback kernels for PrivateUse3, a backend
// key no tensor of this process carries, and this file registers, for PrivateUse1, a C++
// kernel in front of each: the boxed fallback, each kernel that runs an op's CPU kernel
// (`_fallback_kernel`), and each structured functional op (`_structured_kernel`). A call
// that is plain runs here; any other is redispatched to PrivateUse3, where the Python code
// receives it exactly as torch.library would have handed it over.
//
// Python keeps every decision. Which ops may run here, the name each is counted under and
// what each writes come from `fallback.boxed.fast_path_facts`, asked once per op. A plain
// call is what fallback/fast.py's `run_fast` would run without a choice left: every tensor
// a strided mydev tensor of one device (a written one not copy-on-write) or a 0-dim CPU
// input, the other arguments numbers, strings, None or lists of them,
// TORCH_MYDEV_FALLBACK_WARN unset and the fallback's zero-copy path on. It then does what
// `run_fast` does: CPU aliases of the mydev tensors (one CPU storage per mydev storage), the
// op run on CPU through the dispatcher, a return that is a written argument given back as
// that argument, an alias given back as its mydev tensor, a new result adopted (its block
// becomes mydev memory, alias.cpp) or, when it cannot be, copied by Python's `to_mydev`.
// An op that changed a written tensor's layout (an out= alias it grew: a growable alias gets
// new CPU memory, alias.cpp) has it restrided and copied by Python's `write_back`. An op
// that raises here runs again through Python, which raises as CPU raises.
#include "../mydev.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/impl/COW.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/PyInterpreter.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mydev {
namespace {

constexpr c10::DispatchKey kPythonKey = c10::DispatchKey::PrivateUse3;

// What Python decided for one op (`fast_path_facts`), with its calls counted here.
struct OpFacts {
  bool fast = false;
  std::string name;  // the fallback_stats key
  std::vector<uint8_t> written;  // per argument
  std::vector<uint8_t> cpu_allowed;  // per argument: CPU tensors of any dims pass as they are
  std::vector<int> return_alias;  // per return: the argument it is, or -1
  // The op whose CPU kernel runs instead (convolution_overrideable: aten::convolution), and
  // whether its arguments gain `bias_sizes` (convolution_backward_overrideable).
  std::optional<c10::OperatorHandle> target;
  bool bias_sizes = false;
  std::atomic<int64_t> calls{0};
};

struct FallbackState {
  std::shared_mutex mutex;
  std::unordered_map<const c10::FunctionSchema*, std::unique_ptr<OpFacts>> facts;
  // Python callables (kept for the process's life: a kernel may run at interpreter exit).
  PyObject* decide = nullptr;  // fast_path_facts(op) -> (name, written) or None
  PyObject* to_mydev = nullptr;  // (cpu tensor, device index) -> mydev tensor
  PyObject* write_back = nullptr;  // (mydev tensor, cpu tensor) -> None
  std::atomic<bool> zero_copy{true};
  std::vector<std::unique_ptr<torch::Library>> libraries;
  // Calls of the stub's own fallback kernels (random.cpp), by fallback_stats name.
  std::unordered_map<std::string, std::unique_ptr<std::atomic<int64_t>>> named;
};

FallbackState& fallback_state() {
  static auto* s = new FallbackState();  // never destroyed: kernels may outlive statics
  return *s;
}

// "aten::convolution" -> ("aten::convolution", ""); "aten::add.Tensor" -> (.., "Tensor").
std::pair<std::string, std::string> split_name(const std::string& qualified) {
  const auto dot = qualified.find('.');
  if (dot == std::string::npos) {
    return {qualified, ""};
  }
  return {qualified.substr(0, dot), qualified.substr(dot + 1)};
}

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

// The facts of `op`, asked of Python the first time.
OpFacts& facts_of(const c10::OperatorHandle& op) {
  FallbackState& s = fallback_state();
  const c10::FunctionSchema* key = &op.schema();
  {
    std::shared_lock<std::shared_mutex> lock(s.mutex);
    auto found = s.facts.find(key);
    if (found != s.facts.end()) {
      return *found->second;
    }
  }
  auto made = std::make_unique<OpFacts>();
  {
    pybind11::gil_scoped_acquire gil;
    pybind11::handle py_op = torch::detail::getTorchApiFunction(op);
    pybind11::object answer = pybind11::reinterpret_borrow<pybind11::object>(s.decide)(py_op);
    if (!answer.is_none()) {
      auto tuple = answer.cast<pybind11::tuple>();
      made->fast = true;
      made->name = tuple[0].cast<std::string>();
      for (auto item : tuple[1]) {
        made->written.push_back(item.cast<bool>() ? 1 : 0);
      }
      if (!tuple[2].is_none()) {
        const auto [name, overload] = split_name(tuple[2].cast<std::string>());
        made->target =
            c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
        made->bias_sizes = tuple[3].cast<bool>();
      }
      for (auto item : tuple[4]) {
        made->cpu_allowed.push_back(item.cast<bool>() ? 1 : 0);
      }
    }
  }
  const auto& arguments = op.schema().arguments();
  made->written.resize(arguments.size(), 0);
  made->cpu_allowed.resize(arguments.size(), 0);
  // A return is argument i when their alias sets meet (schema.py `_make_info`).
  for (const auto& ret : op.schema().returns()) {
    int index = -1;
    if (ret.alias_info() != nullptr) {
      for (size_t i = 0; i < arguments.size() && index < 0; ++i) {
        const c10::AliasInfo* info = arguments[i].alias_info();
        if (info == nullptr) {
          continue;
        }
        for (const auto& set : ret.alias_info()->beforeSets()) {
          if (info->beforeSets().count(set) != 0) {
            index = static_cast<int>(i);
            break;
          }
        }
      }
    }
    made->return_alias.push_back(index);
  }
  std::unique_lock<std::shared_mutex> lock(s.mutex);
  auto inserted = s.facts.emplace(key, std::move(made));
  return *inserted.first->second;
}

bool warn_requested() {
  const char* value = std::getenv("TORCH_MYDEV_FALLBACK_WARN");
  return value != nullptr && std::strcmp(value, "1") == 0;
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

// Runs `op` on the stack's arguments when the call is plain; false (the stack untouched)
// when Python must run it.
bool run_plain(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  FallbackState& s = fallback_state();
  if (!s.zero_copy.load(std::memory_order_relaxed) || warn_requested()) {
    return false;
  }
  OpFacts& facts = facts_of(op);
  if (!facts.fast) {
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

} // namespace

void python_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(kPythonKey), stack);
}

namespace {

// The boxed fallback and the per-op fallback kernels: the plain path, else Python's.
void fallback_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  if (!run_plain(op, stack)) {
    python_fallback(op, stack);
  }
}

// A structured functional op: its generated composite when every mydev tensor is
// non-overlapping and dense and no argument is a wrapped Python number; else CPU's
// functional kernel, as structured.py `kernel_for` decides: the plain path runs it here
// (`run_on_cpu`'s aliases and adopted result) unless a wrapped number asks Python to pick
// the overload the caller called.
void structured_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  bool dense = true;
  bool wrapped = false;
  auto check = [&](const at::Tensor& t) {
    if (!t.defined()) {
      return;
    }
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
      wrapped = true;
      return;
    }
    dense = dense &&
        (t.device().type() != kDeviceType || t.is_contiguous() ||
         t.unsafeGetTensorImpl()->is_non_overlapping_and_dense());
  };
  for (const c10::IValue& v : torch::jit::last(*stack, n)) {
    if (v.isTensor()) {
      check(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList().vec()) {
        check(t);
      }
    } else if (v.isOptionalTensorList()) {
      wrapped = true;  // never seen in a structured op: Python decides
    }
  }
  if (dense && !wrapped) {
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional, *stack);
  } else if (wrapped || !run_plain(op, stack)) {
    python_fallback(op, stack);
  }
}

} // namespace

torch::Library& aten_library() {
  FallbackState& s = fallback_state();
  if (s.libraries.size() < 2) {
    throw std::runtime_error("_fallback_install must run first");
  }
  return *s.libraries[1];
}

namespace {

// Registers `Kernel` as the PrivateUse1 kernel of the aten op `name`.
template <void (*Kernel)(const c10::OperatorHandle&, c10::DispatchKeySet, torch::jit::Stack*)>
void impl_for(const std::string& name) {
  aten_library().impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<Kernel>());
}

} // namespace

bool plain_calls_allowed() {
  return fallback_state().zero_copy.load(std::memory_order_relaxed) && !warn_requested();
}

void count_fallback_call(const std::string& name) {
  FallbackState& s = fallback_state();
  {
    std::shared_lock<std::shared_mutex> lock(s.mutex);
    auto found = s.named.find(name);
    if (found != s.named.end()) {
      found->second->fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
  std::unique_lock<std::shared_mutex> lock(s.mutex);
  auto& counter = s.named[name];
  if (!counter) {
    counter = std::make_unique<std::atomic<int64_t>>(0);
  }
  counter->fetch_add(1, std::memory_order_relaxed);
}

void init_fallback(pybind11::module& m) {
  m.def(
      "_fallback_install",
      [](pybind11::object decide, pybind11::object to_mydev, pybind11::object write_back) {
        FallbackState& s = fallback_state();
        if (!s.libraries.empty()) {
          return;
        }
        s.decide = decide.release().ptr();
        s.to_mydev = to_mydev.release().ptr();
        s.write_back = write_back.release().ptr();
        auto fallback = std::make_unique<torch::Library>(
            torch::Library::IMPL, "_", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
        fallback->fallback(torch::CppFunction::makeFromBoxedFunction<&fallback_kernel>());
        s.libraries.push_back(std::move(fallback));
        s.libraries.push_back(std::make_unique<torch::Library>(
            torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__));
      },
      "Register the C++ fallback for PrivateUse1 (Python's runs on PrivateUse3): "
      "(fast_path_facts, to_mydev, write_back)");
  m.def(
      "_fallback_kernel",
      &impl_for<&fallback_kernel>,
      "Register the C++ fallback as the PrivateUse1 kernel of an aten op (its Python kernel "
      "is on PrivateUse3)");
  m.def(
      "_structured_kernel",
      &impl_for<&structured_kernel>,
      "Register the C++ kernel of a structured functional aten op for PrivateUse1: the "
      "composite for dense tensors, else CPU's functional kernel (plain calls here, the "
      "others on PrivateUse3)");
  m.def("_fallback_zero_copy", [](bool on) { fallback_state().zero_copy.store(on); },
        "Whether plain fallback calls run in C++ (the fallback's zero-copy path)");
  m.def(
      "_fallback_counts",
      [] {
        FallbackState& s = fallback_state();
        std::shared_lock<std::shared_mutex> lock(s.mutex);
        std::unordered_map<std::string, int64_t> counts;
        for (const auto& [_, facts] : s.facts) {
          const int64_t calls = facts->calls.load();
          if (calls != 0) {
            counts[facts->name] += calls;
          }
        }
        for (const auto& [name, calls] : s.named) {
          if (calls->load() != 0) {
            counts[name] += calls->load();
          }
        }
        return counts;
      },
      "Calls run by the C++ fallback, by fallback_stats name");
  m.def(
      "_fallback_reset_counts",
      [] {
        FallbackState& s = fallback_state();
        std::shared_lock<std::shared_mutex> lock(s.mutex);
        for (auto& [_, facts] : s.facts) {
          facts->calls.store(0);
        }
        for (auto& [_, calls] : s.named) {
          calls->store(0);
        }
      },
      "Forget the C++ fallback's counts");
}

} // namespace mydev
