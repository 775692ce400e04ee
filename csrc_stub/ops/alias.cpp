// CPU tensors over mydev memory. mydev memory is host memory, so a CPU tensor with the same
// sizes, strides, storage offset, dtype and lazy conjugate/negative bits over the same bytes
// reads and writes what the mydev tensor holds: the CPU fallback, gloo and inductor's CPU
// kernels work on such aliases with no copy. Metadata only: no layout rule lives here.
//
// The alias's storage is a CPU StorageImpl over the mydev bytes whose DataPtr context holds
// a reference to the mydev storage, so the bytes live as long as either tensor. By default
// it is not resizable: a CPU op that must grow it raises instead of moving mydev memory
// behind torch's back. A `growable` alias (the CPU fallback's) is resizable on CPU's
// allocator: a CPU op that grows an out= alias gets new CPU memory (the old bytes copied
// over, as ATen's resize_bytes_cpu does), the alias then no longer reaches mydev memory,
// and the fallback's write-back gives the mydev tensor CPU's layout and bytes. Two aliases share one CPU storage only when the second is made with the
// first as `like`; aliasing and overlap checks (at::get_overlap_status) compare storages,
// so callers that alias several tensors of one mydev storage must pass `like`.
//
// Copy-on-write (Tensor._lazy_clone): an alias is written through, so making one takes
// mutable access and materialises a copy-on-write mydev storage, as a CPU kernel writing the
// tensor would. A `readonly` alias of such a storage is copy-on-write itself instead: a
// kernel reading it leaves the mydev tensor lazy, as CPU leaves its inputs.
//
// The other way, adopt_cpu_result gives a CPU op's new result to mydev without a copy: its
// block of CPU's allocator becomes a mydev storage (counted by mydev's allocator while it
// lives, freed by CPU's deleter). Only a block nothing else can reach is taken: a plain block
// of the current CPU allocator, held by this one storage, held by this one tensor.
//
// An alias can die on a thread Python does not know: gloo's worker drops the aliases of a
// finished collective. When that drops the mydev storage to its Python object's last other
// reference, torch takes the GIL to release the object, and a thread taking the GIL while
// the interpreter finalises is ended by CPython inside that (noexcept) destructor, which
// aborts the process. So the release is guarded (guarded_release, python_exit_guard).
#include "../mydev.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/COW.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <typeinfo>
#include <vector>

namespace mydev {
namespace {

// Releases in progress, and whether Python has begun to exit (python_exit_guard).
std::atomic<int> releasing{0};
std::atomic<bool> python_exiting{false};

// The alias's keep-alive of the mydev storage (a reference of the StorageImpl's own count),
// released from whichever thread drops the alias (guarded_release).
void release_storage(void* ctx) {
  guarded_release(ctx, [](void* storage) {
    c10::raw::intrusive_ptr::decref(static_cast<c10::StorageImpl*>(storage));
  });
}

// Written through: a copy-on-write mydev storage is materialised first (mutable access), as
// a CPU kernel writing a copy-on-write tensor materialises it.
c10::Storage cpu_storage_over(const c10::Storage& storage, bool growable) {
  void* data_ptr = storage.mutable_data();
  c10::StorageImpl* keep = storage.unsafeGetStorageImpl();
  c10::raw::intrusive_ptr::incref(keep);
  c10::DataPtr data(data_ptr, keep, &release_storage, c10::Device(c10::DeviceType::CPU));
  return c10::Storage(
      c10::Storage::use_byte_size_t(),
      storage.nbytes(),
      std::move(data),
      growable ? c10::GetCPUAllocator() : nullptr,
      /*resizable=*/growable);
}

// Read only, over a copy-on-write mydev storage: a CPU storage holding a copy-on-write
// reference of its own to the shared bytes (c10::impl::cow, as _lazy_clone makes one). Reads
// materialise nothing and the bytes live as long as this reference; a write materialises
// this CPU storage alone, into a copy from CPU's allocator, and never reaches mydev memory.
c10::Storage cow_cpu_storage_over(const c10::Storage& storage, bool growable) {
  const c10::intrusive_ptr<c10::StorageImpl> clone =
      c10::impl::cow::lazy_clone_storage(*storage.unsafeGetStorageImpl());
  TORCH_INTERNAL_ASSERT(clone, "_cpu_alias: lazy_clone_storage refused a copy-on-write storage");
  // The reference moves out of the clone (a mydev storage), which is then dropped empty.
  c10::DataPtr data = std::move(clone->_mutable_data_ptr_no_checks());
  data.unsafe_set_device(c10::Device(c10::DeviceType::CPU));
  auto impl = c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(),
      storage.nbytes(),
      std::move(data),
      c10::GetCPUAllocator(),
      /*resizable=*/growable);
  impl->set_materializer(&c10::impl::cow::materialize_cow);
  return c10::Storage(std::move(impl));
}

} // namespace

void guarded_release(void* object, void (*destroy)(void*)) {
  // Once Python has begun to exit the object is left to the process's end instead:
  // releasing it may need the GIL, which a foreign thread can no longer take. The counter
  // and the flag are sequentially consistent, so either this release sees the flag or the
  // exit guard sees the release in progress and waits for it (with the GIL free to take).
  releasing.fetch_add(1);
  if (!python_exiting.load()) {
    destroy(object);
  }
  releasing.fetch_sub(1);
}

void python_exit_guard() {
  python_exiting.store(true);
  pybind11::gil_scoped_release no_gil;
  while (releasing.load() != 0) {
    std::this_thread::yield();
  }
}

namespace {
// The testing hook's native thread: 0 holds its alias, 1 may drop it, 2 is dropping it.
std::atomic<int> held_alias{0};
} // namespace

void hold_alias_on_a_native_thread(const at::Tensor& tensor) {
  held_alias.store(0);
  std::thread([alias = cpu_alias(tensor, std::nullopt)]() mutable {
    while (held_alias.load() != 1) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    held_alias.store(2);
    alias.reset();
  }).detach();
}

void drop_held_alias_now() {
  held_alias.store(1);
  while (held_alias.load() != 2) {
    std::this_thread::yield();
  }
  // Still holding the GIL, so that a release that needs it is waiting for it on return.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

at::Tensor cpu_alias(
    const at::Tensor& tensor,
    const std::optional<at::Tensor>& like,
    bool readonly,
    bool growable) {
  TORCH_CHECK(
      tensor.defined() && tensor.device().type() == kDeviceType &&
          tensor.layout() == c10::kStrided && tensor.has_storage(),
      "_cpu_alias: expected a strided mydev tensor with storage, got ",
      tensor.defined() ? tensor.toString() : std::string("an undefined tensor"));
  const c10::Storage& storage = tensor.storage();
  c10::Storage cpu_storage;
  if (like.has_value() && like->defined()) {
    TORCH_CHECK(
        like->device().is_cpu() && like->has_storage() &&
            like->storage().data() == storage.data() &&
            like->storage().nbytes() == storage.nbytes(),
        "_cpu_alias: `like` must be a CPU alias of the same mydev storage");
    cpu_storage = like->storage();
  } else if (readonly && c10::impl::cow::is_cow_data_ptr(storage.data_ptr())) {
    cpu_storage = cow_cpu_storage_over(storage, growable);
  } else {
    cpu_storage = cpu_storage_over(storage, growable);
  }
  at::Tensor alias = at::detail::make_tensor<c10::TensorImpl>(
      std::move(cpu_storage), c10::DispatchKeySet(c10::DispatchKey::CPU), tensor.dtype());
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(
      tensor.sizes(), tensor.strides(), tensor.storage_offset());
  alias._set_conj(tensor.is_conj());
  alias._set_neg(tensor.is_neg());
  return alias;
}

at::Tensor adopt_cpu_result(const at::Tensor& tensor, int64_t index) {
  const c10::DeviceIndex device = resolve_device(index);
  if (!tensor.defined() || !tensor.device().is_cpu() || tensor.layout() != c10::kStrided ||
      !tensor.has_storage() || tensor.is_conj() || tensor.is_neg() ||
      tensor.use_count() != 1) {
    return {};
  }
  c10::TensorImpl* impl = tensor.unsafeGetTensorImpl();
  // A plain dense tensor only: not quantized (QTensorImpl), nested, or a Python subclass's.
  if (typeid(*impl) != typeid(c10::TensorImpl) || tensor.is_quantized() ||
      tensor.is_nested() || impl->is_python_dispatch() ||
      !impl->allow_tensor_metadata_change()) {
    return {};
  }
  const c10::Storage& storage = tensor.storage();
  c10::StorageImpl* storage_impl = storage.unsafeGetStorageImpl();
  const c10::DataPtr& data = storage_impl->data_ptr();
  const c10::DeleterFnPtr cpu_deleter = c10::GetAllocator(c10::DeviceType::CPU)->raw_deleter();
  const size_t nbytes = storage_impl->nbytes();
  const bool plain_block = cpu_deleter != nullptr && data.get_deleter() == cpu_deleter &&
      data.get_context() == data.get() && data.get() != nullptr &&
      !c10::impl::cow::is_cow_data_ptr(data);
  if (!plain_block || nbytes == 0 || storage.use_count() != 1 ||
      reinterpret_cast<uintptr_t>(data.get()) % 64 != 0) {
    return {};
  }
  // Everything read before anything is taken: nothing below can fail half-way.
  const c10::SmallVector<int64_t, 6> sizes(tensor.sizes().begin(), tensor.sizes().end());
  const c10::SmallVector<int64_t, 6> strides(tensor.strides().begin(), tensor.strides().end());
  const int64_t offset = tensor.storage_offset();
  at::Tensor result = at::detail::make_tensor<c10::TensorImpl>(
      c10::Storage(
          c10::Storage::use_byte_size_t(),
          0,
          c10::DataPtr(nullptr, c10::Device(kDeviceType, device)),
          allocator(),
          /*resizable=*/true),
      c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      tensor.dtype());
  result.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
  c10::DataPtr original =
      storage_impl->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::DeviceType::CPU)));
  storage_impl->set_nbytes(0);
  c10::StorageImpl* adopted = result.storage().unsafeGetStorageImpl();
  adopted->set_data_ptr_noswap(adopt_data(std::move(original), nbytes, device));
  adopted->set_nbytes(nbytes);
  // The CPU tensor is left empty (no elements, offset 0) rather than over a storage it lost.
  impl->set_sizes_contiguous({0});
  impl->set_storage_offset(0);
  return result;
}

bool plain_mydev(const at::Tensor& t) {
  return t.defined() && t.device().type() == kDeviceType && t.layout() == c10::kStrided &&
      t.has_storage() && !t.is_conj() && !t.is_neg();
}

at::Tensor as_mydev(const at::Tensor& cpu, int64_t index) {
  at::Tensor adopted = adopt_cpu_result(cpu, index);
  if (adopted.defined()) {
    return adopted;
  }
  // Copied on CPU into a block of its own, which can be adopted: no mydev kernel runs (one
  // might wait for its loop's compile).
  if (cpu.is_non_overlapping_and_dense()) {
    const at::Tensor own = at::empty_strided(cpu.sizes(), cpu.strides(), cpu.options());
    adopted = adopt_cpu_result(own.copy_(cpu), index);
    if (adopted.defined()) {
      return adopted;
    }
  }
  return empty_strided(cpu.sizes(), cpu.strides(), cpu.scalar_type(), index).copy_(cpu);
}

} // namespace mydev
