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
// `run_fast` does (plain_call.cpp): CPU aliases of the mydev tensors (one CPU storage per
// mydev storage), the op run on CPU through the dispatcher, a return that is a written
// argument given back as that argument, an alias given back as its mydev tensor, a new
// result adopted (its block becomes mydev memory, alias.cpp) or, when it cannot be, copied
// by Python's `to_mydev`.
// An op that changed a written tensor's layout (an out= alias it grew: a growable alias gets
// new CPU memory, alias.cpp) has it restrided and copied by Python's `write_back`. An op
// that raises here runs again through Python, which raises as CPU raises.
#include "fallback.h"

#include <torch/csrc/PyInterpreter.h>
#include <torch/csrc/utils/pybind.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <utility>

namespace mydev {
namespace {

constexpr c10::DispatchKey kPythonKey = c10::DispatchKey::PrivateUse3;

// The op named "aten::convolution" or "aten::add.Tensor" (its overload after the dot).
c10::OperatorHandle op_named(const std::string& qualified) {
  const auto dot = qualified.find('.');
  const std::string name = qualified.substr(0, dot);
  const std::string overload = dot == std::string::npos ? "" : qualified.substr(dot + 1);
  return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), overload.c_str());
}

bool warn_requested() {
  const char* value = std::getenv("TORCH_MYDEV_FALLBACK_WARN");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

} // namespace

FallbackState& fallback_state() {
  static auto* s = new FallbackState();  // never destroyed: kernels may outlive statics
  return *s;
}

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
        made->target = op_named(tuple[2].cast<std::string>());
        made->bias_sizes = tuple[3].cast<bool>();
      }
      for (auto item : tuple[4]) {
        made->cpu_allowed.push_back(item.cast<bool>() ? 1 : 0);
      }
      if (!tuple[5].is_none()) {
        made->out = op_named(tuple[5].cast<std::string>());
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

void python_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(kPythonKey), stack);
}

namespace {

// The boxed fallback and the per-op fallback kernels: the plain path, else Python's.
void fallback_kernel(const c10::OperatorHandle& op, OpFacts& facts, torch::jit::Stack* stack) {
  if (!run_plain(op, facts, stack)) {
    python_fallback(op, stack);
  }
}

void boxed_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  fallback_kernel(op, facts_of(op), stack);
}

// A structured functional op: CPU's functional kernel (the plain path's aliases and adopted
// result), as structured.py `kernel_for` decides; its generated composite instead (which
// allocates the output on mydev and calls the out= overload) when every mydev tensor is
// non-overlapping and dense and either that out= overload has a mydev kernel of its own or
// a mydev tensor holds at least kCompositeBytes: mydev's allocator keeps such blocks, where
// CPU's result would be new pages to fault in (64 MB: two thirds of the op's time). A wrapped
// Python number asks Python to pick the overload the caller called.
constexpr int64_t kCompositeBytes = int64_t{1} << 20;

void structured_kernel(const c10::OperatorHandle& op, OpFacts& facts, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  bool dense = true;
  bool wrapped = false;
  bool large = false;
  auto check = [&](const at::Tensor& t) {
    if (!t.defined()) {
      return;
    }
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
      wrapped = true;
      return;
    }
    if (t.device().type() != kDeviceType) {
      return;
    }
    dense = dense && (t.is_contiguous() || t.unsafeGetTensorImpl()->is_non_overlapping_and_dense());
    large = large || t.numel() * static_cast<int64_t>(t.itemsize()) >= kCompositeBytes;
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
  if (wrapped) {
    python_fallback(op, stack);
    return;
  }
  if (dense &&
      (large || (facts.out && facts.out->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)))) {
    op.callBoxedForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional, *stack);
  } else if (!run_plain(op, facts, stack)) {
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

using Run = void (*)(const c10::OperatorHandle&, OpFacts&, torch::jit::Stack*);

// One op's kernel: `run` with the op's facts, found at its first call and kept (facts are
// never freed), so a call skips facts_of's lock and lookup.
struct PerOpKernel : c10::OperatorKernel {
  explicit PerOpKernel(Run run) : run(run) {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
    OpFacts* found = facts.load(std::memory_order_acquire);
    if (found == nullptr) {
      found = &facts_of(op);
      facts.store(found, std::memory_order_release);
    }
    run(op, *found, stack);
  }

  Run run;
  std::atomic<OpFacts*> facts{nullptr};
};

// Registers `run` as the PrivateUse1 kernel of the aten op `name`.
void impl_for(const std::string& name, Run run) {
  aten_library().impl(
      name.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<PerOpKernel>(run)));
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
        fallback->fallback(torch::CppFunction::makeFromBoxedFunction<&boxed_fallback>());
        s.libraries.push_back(std::move(fallback));
        s.libraries.push_back(std::make_unique<torch::Library>(
            torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__));
      },
      "Register the C++ fallback for PrivateUse1 (Python's runs on PrivateUse3): "
      "(fast_path_facts, to_mydev, write_back)");
  m.def(
      "_fallback_kernel",
      [](const std::string& name) { impl_for(name, &fallback_kernel); },
      "Register the C++ fallback as the PrivateUse1 kernel of an aten op (its Python kernel "
      "is on PrivateUse3)");
  m.def(
      "_structured_kernel",
      [](const std::string& name) { impl_for(name, &structured_kernel); },
      "Register the C++ kernel of a structured functional aten op for PrivateUse1: CPU's "
      "functional kernel (plain calls here, the others on PrivateUse3), or the composite "
      "for dense tensors when its out= overload has a mydev kernel or they are large "
      "(_COMPOSITE_BYTES)");
  m.attr("_COMPOSITE_BYTES") = kCompositeBytes;
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
