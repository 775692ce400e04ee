// torch_mydev._C: the Python bindings of the stub (allocation primitive, statistics,
// generator). Python-facing names start with an underscore; torch_mydev wraps them.
#include "mydev.h"
#include "python_args.h"

#include <ATen/EmptyTensor.h>
// Its alignas(hardware_destructive_interference_size) warns under GCC; nothing of ours
// depends on that value.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winterference-size"
#include <ATen/core/CachingHostAllocator.h>
#pragma GCC diagnostic pop
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Event.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/version.h>

namespace mydev {

at::Tensor empty_strided(
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    c10::ScalarType dtype,
    int64_t index) {
  const DeviceScope scope(resolve_device(index));
  TORCH_CHECK(
      sizes.size() == strides.size(),
      "mydev empty_strided: got ",
      sizes.size(),
      " sizes but ",
      strides.size(),
      " strides");
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(sizes, strides, allocator(), keys, dtype);
}

namespace {

// The allocator's counters of one device, flat and named as torch.cuda.memory_stats
// (and torch.accelerator.memory_stats) name them.
pybind11::dict stats_dict(int64_t index) {
  using c10::CachingAllocator::Stat;
  using c10::CachingAllocator::StatArray;
  const c10::CachingDeviceAllocator::DeviceStats s = device_stats(resolve_device(index));
  pybind11::dict d;
  const auto add_stat = [&d](const std::string& prefix, const Stat& stat) {
    d[pybind11::str(prefix + ".current")] = stat.current;
    d[pybind11::str(prefix + ".peak")] = stat.peak;
    d[pybind11::str(prefix + ".allocated")] = stat.allocated;
    d[pybind11::str(prefix + ".freed")] = stat.freed;
  };
  const std::pair<const char*, const StatArray*> arrays[] = {
      {"allocation", &s.allocation},
      {"segment", &s.segment},
      {"active", &s.active},
      {"inactive_split", &s.inactive_split},
      {"allocated_bytes", &s.allocated_bytes},
      {"reserved_bytes", &s.reserved_bytes},
      {"active_bytes", &s.active_bytes},
      {"inactive_split_bytes", &s.inactive_split_bytes},
      {"requested_bytes", &s.requested_bytes}};
  const char* pools[] = {"all", "small_pool", "large_pool"};
  for (const auto& [name, array] : arrays) {
    for (size_t pool = 0; pool < 3; ++pool) {
      add_stat(std::string(name) + "." + pools[pool], (*array)[pool]);
    }
  }
  add_stat("oversize_allocations", s.oversize_allocations);
  add_stat("oversize_segments", s.oversize_segments);
  d["num_alloc_retries"] = s.num_alloc_retries;
  d["num_ooms"] = s.num_ooms;
  d["num_sync_all_streams"] = s.num_sync_all_streams;
  d["num_device_alloc"] = s.num_device_alloc;
  d["num_device_free"] = s.num_device_free;
  d["max_split_size"] = s.max_split_size;
  return d;
}

// The pinned host allocator's counters, named as torch.cuda.host_memory_stats names them.
pybind11::dict host_stats_dict() {
  const at::HostStats s = at::getHostAllocator(kDeviceType)->get_stats();
  pybind11::dict d;
  const auto add_stat = [&d](const std::string& prefix, const c10::CachingAllocator::Stat& stat) {
    d[pybind11::str(prefix + ".current")] = stat.current;
    d[pybind11::str(prefix + ".peak")] = stat.peak;
    d[pybind11::str(prefix + ".allocated")] = stat.allocated;
    d[pybind11::str(prefix + ".freed")] = stat.freed;
  };
  add_stat("allocations", s.allocations);
  add_stat("allocated_bytes", s.allocated_bytes);
  add_stat("active_requests", s.active_requests);
  add_stat("active_bytes", s.active_bytes);
  d["num_host_alloc"] = s.num_host_alloc;
  d["num_host_free"] = s.num_host_free;
  return d;
}

// _empty_strided(sizes, strides, dtype, index): `empty_strided` for Python, without pybind's
// argument conversion (the allocation is on every functional op's per-call path).
PyObject* empty_strided_py(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 4) {
    PyErr_SetString(PyExc_TypeError, "_empty_strided(sizes, strides, dtype, index)");
    return nullptr;
  }
  at::Tensor out;
  if (!new_strided("_empty_strided", args[0], args[1], args[2], args[3], out)) {
    return nullptr;
  }
  return THPVariable_Wrap(std::move(out));
  END_HANDLE_TH_ERRORS
}

// _storage_span(tensor) -> (address of the storage's first byte, the storage's bytes), read
// through const access: unlike UntypedStorage.data_ptr(), which takes mutable access, it
// leaves a copy-on-write storage as it is. For Python kernels reading their inputs.
PyObject* storage_span(PyObject* /*module*/, PyObject* arg) {
  HANDLE_TH_ERRORS
  if (!THPVariable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "_storage_span takes a tensor");
    return nullptr;
  }
  const at::Tensor& t = THPVariable_Unpack(arg);
  TORCH_CHECK(t.defined() && t.has_storage(), "_storage_span: the tensor has no storage");
  const c10::Storage& storage = t.storage();
  return Py_BuildValue(
      "(Kn)",
      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(storage.data())),
      static_cast<Py_ssize_t>(storage.nbytes()));
  END_HANDLE_TH_ERRORS
}

// _fill_uninitialized(tensor): fill_uninitialized (factories.cpp) for the Python factories
// (empty_like); returns None.
PyObject* fill_uninitialized_py(PyObject* /*module*/, PyObject* arg) {
  HANDLE_TH_ERRORS
  if (!THPVariable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "_fill_uninitialized takes a tensor");
    return nullptr;
  }
  fill_uninitialized(THPVariable_Unpack(arg));
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

// _event_elapsed_time(start, end): start.elapsed_time(end) for torch.Event objects and their
// subclasses (torch.Event.elapsed_time accepts exactly torch.Event as `end`, so
// torch.mydev.Event, a subclass, goes through here). The checks are c10::Event's: ValueError
// unless both were made with enable_timing=True and both were recorded.
PyObject* event_elapsed_time(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "_event_elapsed_time(start, end)");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < 2; ++i) {
    const int is_event = THPEventClass == nullptr
        ? 0
        : PyObject_IsInstance(args[i], reinterpret_cast<PyObject*>(THPEventClass));
    if (is_event < 0) {
      return nullptr;
    }
    TORCH_CHECK(is_event == 1, "expected other to be a torch.Event object");
  }
  const auto* start = reinterpret_cast<THPEvent*>(args[0]);
  const auto* end = reinterpret_cast<THPEvent*>(args[1]);
  return PyFloat_FromDouble(start->event.elapsedTime(end->event));
  END_HANDLE_TH_ERRORS
}

// _adopt(tensor, index): adopt_cpu_result for Python, or None. The tensor is read in place
// from its Python object (no new reference), so "nothing else holds it" is exact.
PyObject* adopt_py(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  if (nargs != 2 || !THPVariable_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "_adopt(tensor, index)");
    return nullptr;
  }
  const long long index = PyLong_AsLongLong(args[1]);
  if (index == -1 && PyErr_Occurred()) {
    return nullptr;
  }
  at::Tensor adopted = adopt_cpu_result(THPVariable_Unpack(args[0]), index);
  if (!adopted.defined()) {
    Py_RETURN_NONE;
  }
  return THPVariable_Wrap(std::move(adopted));
  END_HANDLE_TH_ERRORS
}

PyMethodDef kFastMethods[] = {
    {"_empty_strided",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(empty_strided_py)),
     METH_FASTCALL,
     "(sizes, strides, dtype, index) -> an uninitialised strided tensor on mydev"},
    {"_adopt",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(adopt_py)),
     METH_FASTCALL,
     "(cpu tensor, index) -> the tensor's memory as a new mydev tensor when nothing else holds "
     "it (the CPU tensor is left empty), else None"},
    {"_storage_span",
     storage_span,
     METH_O,
     "(tensor) -> (storage address, storage bytes), read without materialising a "
     "copy-on-write storage"},
    {"_fill_uninitialized",
     fill_uninitialized_py,
     METH_O,
     "(new mydev tensor) -> None: NaN / the dtype's maximum under deterministic algorithms with "
     "fill_uninitialized_memory, as torch's empty"},
    {"_event_elapsed_time",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(event_elapsed_time)),
     METH_FASTCALL,
     "(start, end) -> milliseconds between the records of two torch.Event objects"},
    {nullptr, nullptr, 0, nullptr}};

} // namespace

// c10d_backend.cpp: the _MydevBackend class (a c10d::Backend over gloo and CPU aliases).
void init_c10d(pybind11::module& m);
// replay.cpp: _signature, _replay, _replay_copy and the replay record's field names.
void init_replay(pybind11::module& m);
// fallback.cpp: the CPU fallback's plain calls in C++ (_fallback_install, ...).
void init_fallback(pybind11::module& m);
// native_replay.cpp: recorded elementwise calls replayed before Python (_native_replay_*).
void init_native_replay(pybind11::module& m);
// numbers.cpp: _native_number_bytes, a Python number's bytes as the C++ replay converts it.
void init_numbers(pybind11::module& m);
// random.cpp: the lend lock of random ops and native_dropout's plain call (_rng_lend_*).
void init_random(pybind11::module& m);
void init_sdpa(pybind11::module& m);

} // namespace mydev

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  if (!mydev::device_count_error().empty()) {
    throw std::runtime_error("torch_mydev: " + mydev::device_count_error());
  }
  m.doc() = "mydev runtime stub: allocator statistics, allocation primitive, generator";
  PyModule_AddFunctions(m.ptr(), mydev::kFastMethods);
  mydev::init_c10d(m);
  mydev::init_replay(m);
  mydev::init_fallback(m);
  mydev::init_native_replay(m);
  mydev::init_numbers(m);
  mydev::init_random(m);
  mydev::init_sdpa(m);
  // The torch release whose headers and libraries this stub was built against.
  m.attr("TORCH_BUILD_VERSION") = TORCH_VERSION;
  m.attr("HUGE_PAGE_MIN_BYTES") = mydev::kHugePageMinBytes;
  m.def("_memory_stats", &mydev::stats_dict, pybind11::arg("index") = -1,
        "Allocator counters of one device, torch.cuda.memory_stats names");
  m.def("_reset_peak_memory_stats", [](int64_t index) {
    mydev::reset_peak_memory_stats(mydev::resolve_device(index));
  });
  m.def("_reset_accumulated_memory_stats", [](int64_t index) {
    mydev::reset_accumulated_memory_stats(mydev::resolve_device(index));
  });
  m.def("_empty_cache", &mydev::empty_cache, "Free the blocks kept for reuse (all devices)");
  m.def("_mem_get_info", [](int64_t index) {
    mydev::check_device_index(index);
    return mydev::host_memory_info();
  }, "(free, total) bytes of host memory");
  m.def("_host_memory_stats", &mydev::host_stats_dict, "Pinned host allocator counters");
  m.def("_reset_host_peak_memory_stats", [] {
    at::getHostAllocator(mydev::kDeviceType)->reset_peak_stats();
  });
  m.def("_device_count", [] { return static_cast<int>(mydev::device_count()); });
  m.def("_check_device", [](int64_t index) { mydev::check_device_index(index); });
  m.def("_current_device", [] { return static_cast<int>(mydev::current_device()); });
  m.def("_set_device", [](int64_t index) {
    mydev::set_device(mydev::resolve_device(index));
  });
  // As torch.cuda._exchange_device: a negative index changes nothing and returns -1.
  m.def("_exchange_device", [](int64_t index) {
    if (index < 0) {
      return -1;
    }
    return static_cast<int>(mydev::exchange_device(mydev::resolve_device(index)));
  });
  m.def("_is_pinned_ptr", [](uintptr_t ptr) {
    return mydev::is_pinned(reinterpret_cast<const void*>(ptr));
  });
  m.def(
      "_cpu_alias",
      &mydev::cpu_alias,
      pybind11::arg("tensor"),
      pybind11::arg("like") = pybind11::none(),
      pybind11::arg("readonly") = false,
      pybind11::arg("growable") = false,
      "A CPU tensor over the mydev tensor's bytes (same sizes, strides, offset, dtype); with "
      "`like` (an earlier alias of the same storage) it shares that alias's CPU storage. A "
      "copy-on-write storage is materialised first unless `readonly` (the alias is then "
      "copy-on-write too). A `growable` alias's storage is resizable on CPU's allocator: "
      "a CPU op that grows it moves it to new CPU memory");
  pybind11::module_::import("atexit").attr("register")(
      pybind11::cpp_function(&mydev::python_exit_guard));
  m.def("_hold_alias_on_a_native_thread", &mydev::hold_alias_on_a_native_thread,
        "Testing hook: a native thread holds a CPU alias of the tensor");
  m.def("_drop_held_alias_now", &mydev::drop_held_alias_now,
        "Testing hook: that thread drops its alias while this call keeps the GIL");
  m.def("_default_generator", [](int64_t index) {
    mydev::check_device_index(index);
    return mydev::default_generator(static_cast<c10::DeviceIndex>(index));
  });
}
