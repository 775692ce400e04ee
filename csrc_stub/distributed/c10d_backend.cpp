// The c10d backend of mydev: a c10d::Backend that hands gloo CPU aliases of mydev tensors.
//
// mydev memory is host memory, so gloo (the engine) reduces, gathers and sends the bytes of
// a mydev tensor through a CPU tensor over the same memory (cpu_alias, alias.cpp), with no
// copy in or out. Being a C++ Backend registered on the group for the mydev device is what
// lets everything that asks ProcessGroup::getBackend(mydev) find it: the functional
// collectives (torch.ops._c10d_functional.*, DTensor.full_tensor, compiled collectives) and
// _coalescing_manager(device=...). Works report the mydev tensors as their results.
#include "../mydev.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#include <memory>
#include <mutex>
#include <unordered_map>

namespace mydev {
namespace {

using c10d::Work;
using WorkPtr = c10::intrusive_ptr<Work>;

// What a collective wrote into contiguous temporaries, to be copied into the mydev tensors
// (through their aliases) once it has finished; done once, by whoever sees it finish first.
class CopyBack {
 public:
  void add(at::Tensor alias, at::Tensor temporary) {
    pairs_.emplace_back(std::move(alias), std::move(temporary));
  }
  bool empty() const {
    return pairs_.empty();
  }
  void finish() {
    std::call_once(once_, [this] {
      for (auto& [alias, temporary] : pairs_) {
        alias.copy_(temporary);
      }
    });
  }

 private:
  std::vector<std::pair<at::Tensor, at::Tensor>> pairs_;
  std::once_flag once_;
};

// The tensors of one call as gloo takes them: a CPU tensor as it is; a mydev tensor as a
// CPU alias of its memory, or, when the alias is not contiguous or has a lazy conjugate or
// negative bit, a contiguous CPU temporary that is copied back afterwards (copy_back).
// Tensors of one mydev storage get aliases of one CPU storage.
class Aliases {
 public:
  at::Tensor operator()(const at::Tensor& t) {
    if (!t.defined() || t.device().type() != kDeviceType) {
      return t;
    }
    const void* key = t.storage().data();
    const auto found = first_.find(key);
    at::Tensor alias;
    if (found != first_.end()) {
      alias = cpu_alias(t, found->second);
    } else {
      alias = cpu_alias(t, std::nullopt);
      first_.emplace(key, alias);
    }
    if (alias.is_contiguous() && !alias.is_conj() && !alias.is_neg()) {
      return alias;
    }
    at::Tensor temporary = alias.resolve_conj().resolve_neg().contiguous();
    copy_back_->add(alias, temporary);
    return temporary;
  }

  std::shared_ptr<CopyBack> copy_back() const {
    return copy_back_;
  }

  std::vector<at::Tensor> operator()(const std::vector<at::Tensor>& ts) {
    std::vector<at::Tensor> out;
    out.reserve(ts.size());
    for (const auto& t : ts) {
      out.push_back((*this)(t));
    }
    return out;
  }

  std::vector<std::vector<at::Tensor>> operator()(
      const std::vector<std::vector<at::Tensor>>& lists) {
    std::vector<std::vector<at::Tensor>> out;
    out.reserve(lists.size());
    for (const auto& ts : lists) {
      out.push_back((*this)(ts));
    }
    return out;
  }

 private:
  std::unordered_map<const void*, at::Tensor> first_;
  std::shared_ptr<CopyBack> copy_back_ = std::make_shared<CopyBack>();
};

c10::TypePtr tensor_list_type() {
  return c10::ListType::create(c10::TensorType::get());
}

// gloo's Work, reporting the caller's (mydev) tensors as its result.
class MydevWork : public Work {
 public:
  MydevWork(
      WorkPtr inner,
      std::vector<at::Tensor> outputs,
      c10d::OpType type,
      std::shared_ptr<CopyBack> copy_back)
      : Work(-1, type),
        inner_(std::move(inner)),
        outputs_(std::move(outputs)),
        copy_back_(std::move(copy_back)) {}

  bool isCompleted() override {
    return inner_->isCompleted();
  }
  bool isSuccess() const override {
    return inner_->isSuccess();
  }
  std::exception_ptr exception() const override {
    return inner_->exception();
  }
  int sourceRank() const override {
    return inner_->sourceRank();
  }
  std::vector<at::Tensor> result() override {
    return outputs_;
  }
  void synchronize() override {
    inner_->synchronize();
  }
  bool wait(std::chrono::milliseconds timeout) override {
    const bool done = inner_->wait(timeout);
    copy_back_->finish();
    return done;
  }
  void abort() override {
    inner_->abort();
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    // gloo's worker runs the callback and then drops it: its tensors are released as an
    // alias's storage is (guarded_release), in case that drop is their last.
    std::shared_ptr<const std::vector<at::Tensor>> outputs(
        new std::vector<at::Tensor>(outputs_), [](const std::vector<at::Tensor>* tensors) {
          guarded_release(const_cast<std::vector<at::Tensor>*>(tensors), [](void* object) {
            delete static_cast<std::vector<at::Tensor>*>(object);
          });
        });
    std::shared_ptr<CopyBack> copy_back = copy_back_;
    return inner_->getFuture()->then(
        [outputs, copy_back](c10::ivalue::Future& done) -> c10::IValue {
          done.value();  // rethrows gloo's error
          copy_back->finish();
          return c10::IValue(*outputs);
        },
        tensor_list_type());
  }

 private:
  WorkPtr inner_;
  std::vector<at::Tensor> outputs_;
  std::shared_ptr<CopyBack> copy_back_;
};

// Work that finished before it was returned (reduce-scatter, the end of coalescing).
class DoneWork : public Work {
 public:
  DoneWork(std::vector<at::Tensor> outputs, c10d::OpType type)
      : Work(-1, type), outputs_(std::move(outputs)) {
    future_ = c10::make_intrusive<c10::ivalue::Future>(tensor_list_type());
    future_->markCompleted(c10::IValue(outputs_));
  }

  bool isCompleted() override {
    return true;
  }
  bool isSuccess() const override {
    return true;
  }
  std::vector<at::Tensor> result() override {
    return outputs_;
  }
  bool wait(std::chrono::milliseconds /*timeout*/) override {
    return true;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return future_;
  }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

std::vector<at::Tensor> flat(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> out;
  for (const auto& ts : lists) {
    out.insert(out.end(), ts.begin(), ts.end());
  }
  return out;
}

class MydevBackend : public c10d::Backend {
 public:
  explicit MydevBackend(c10::intrusive_ptr<c10d::Backend> gloo)
      : Backend(gloo->getRank(), gloo->getSize()), gloo_(std::move(gloo)) {}

  const std::string getBackendName() const override {
    return "mydev";
  }
  bool supportsCoalescing() const override {
    return true;
  }
  void setTimeout(std::chrono::milliseconds timeout) override {
    gloo_->setTimeout(timeout);
  }

  // Between start and end, each collective runs as it is issued; endCoalescing waits for
  // all of them and returns one finished Work.
  void startCoalescing() override {
    TORCH_CHECK(!coalescing_, "mydev backend: startCoalescing called twice");
    coalescing_ = true;
    pending_.clear();
  }
  WorkPtr endCoalescing() override {
    TORCH_CHECK(coalescing_, "mydev backend: endCoalescing without startCoalescing");
    coalescing_ = false;
    std::vector<at::Tensor> outputs;
    for (const auto& work : pending_) {
      work->wait();
      const auto done = work->result();
      outputs.insert(outputs.end(), done.begin(), done.end());
    }
    pending_.clear();
    return c10::make_intrusive<DoneWork>(std::move(outputs), c10d::OpType::COALESCED);
  }

  WorkPtr broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts)
      override {
    Aliases aliases;
    auto cpu = aliases(tensors);
    return track(gloo_->broadcast(cpu, opts), tensors, c10d::OpType::BROADCAST, aliases);
  }

  WorkPtr allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts)
      override {
    Aliases aliases;
    auto cpu = aliases(tensors);
    return track(gloo_->allreduce(cpu, opts), tensors, c10d::OpType::ALLREDUCE, aliases);
  }

  WorkPtr allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts) override {
    Aliases aliases;
    auto cpu = aliases(tensors);
    return track(gloo_->allreduce_coalesced(cpu, opts), tensors, c10d::OpType::ALLREDUCE, aliases);
  }

  WorkPtr reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override {
    Aliases aliases;
    auto cpu = aliases(tensors);
    return track(gloo_->reduce(cpu, opts), tensors, c10d::OpType::REDUCE, aliases);
  }

  WorkPtr allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    Aliases aliases;
    auto cpu_out = aliases(outputs);
    auto cpu_in = aliases(inputs);
    return track(gloo_->allgather(cpu_out, cpu_in, opts), flat(outputs),
                 c10d::OpType::ALLGATHER, aliases);
  }

  WorkPtr _allgather_base(
      at::Tensor& output,
      at::Tensor& input,
      const c10d::AllgatherOptions& opts) override {
    Aliases aliases;
    at::Tensor cpu_out = aliases(output);
    at::Tensor cpu_in = aliases(input);
    return track(gloo_->_allgather_base(cpu_out, cpu_in, opts), {output},
                 c10d::OpType::_ALLGATHER_BASE, aliases);
  }

  WorkPtr allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override {
    Aliases aliases;
    auto cpu_out = aliases(outputs);
    auto cpu_in = aliases(inputs);
    return track(gloo_->allgather_into_tensor_coalesced(cpu_out, cpu_in, opts), outputs,
                 c10d::OpType::COALESCED, aliases);
  }

  WorkPtr gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::GatherOptions& opts) override {
    Aliases aliases;
    auto cpu_out = aliases(outputs);
    auto cpu_in = aliases(inputs);
    return track(gloo_->gather(cpu_out, cpu_in, opts), flat(outputs), c10d::OpType::GATHER, aliases);
  }

  WorkPtr scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override {
    Aliases aliases;
    auto cpu_out = aliases(outputs);
    auto cpu_in = aliases(inputs);
    return track(gloo_->scatter(cpu_out, cpu_in, opts), outputs, c10d::OpType::SCATTER, aliases);
  }

  WorkPtr reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    Aliases aliases;
    auto cpu_out = aliases(outputs);
    auto cpu_in = aliases(inputs);
    return track(gloo_->reduce_scatter(cpu_out, cpu_in, opts), outputs,
                 c10d::OpType::REDUCE_SCATTER, aliases);
  }

  WorkPtr _reduce_scatter_base(
      at::Tensor& output,
      at::Tensor& input,
      const c10d::ReduceScatterOptions& opts) override {
    // gloo checks this with a fatal CHECK that aborts the process; raise instead.
    TORCH_CHECK(
        output.dim() > 0 && input.dim() > 0 && output.size(0) * getSize() == input.size(0),
        "mydev backend: reduce_scatter_tensor needs input.size(0) == world size (", getSize(),
        ") * output.size(0), got input ", input.sizes(), " and output ", output.sizes());
    Aliases aliases;
    at::Tensor cpu_out = aliases(output);
    at::Tensor cpu_in = aliases(input);
    return track(gloo_->_reduce_scatter_base(cpu_out, cpu_in, opts), {output},
                 c10d::OpType::_REDUCE_SCATTER_BASE, aliases);
  }

  WorkPtr reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override {
    Aliases aliases;
    auto cpu_out = aliases(outputs);
    auto cpu_in = aliases(inputs);
    return track(gloo_->reduce_scatter_tensor_coalesced(cpu_out, cpu_in, opts), outputs,
                 c10d::OpType::COALESCED, aliases);
  }

  WorkPtr alltoall_base(
      at::Tensor& output,
      at::Tensor& input,
      std::vector<int64_t>& output_splits,
      std::vector<int64_t>& input_splits,
      const c10d::AllToAllOptions& opts) override {
    Aliases aliases;
    at::Tensor cpu_out = aliases(output);
    at::Tensor cpu_in = aliases(input);
    return track(gloo_->alltoall_base(cpu_out, cpu_in, output_splits, input_splits, opts),
                 {output}, c10d::OpType::ALLTOALL_BASE, aliases);
  }

  WorkPtr alltoall(
      std::vector<at::Tensor>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts) override {
    Aliases aliases;
    auto cpu_out = aliases(outputs);
    auto cpu_in = aliases(inputs);
    return track(gloo_->alltoall(cpu_out, cpu_in, opts), outputs, c10d::OpType::ALLTOALL, aliases);
  }

  WorkPtr send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    Aliases aliases;
    auto cpu = aliases(tensors);
    return track(gloo_->send(cpu, dst, tag), tensors, c10d::OpType::SEND, aliases);
  }

  WorkPtr recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    Aliases aliases;
    auto cpu = aliases(tensors);
    return track(gloo_->recv(cpu, src, tag), tensors, c10d::OpType::RECV, aliases);
  }

  WorkPtr recvAnysource(std::vector<at::Tensor>& tensors, int tag) override {
    Aliases aliases;
    auto cpu = aliases(tensors);
    return track(gloo_->recvAnysource(cpu, tag), tensors, c10d::OpType::RECVANYSOURCE, aliases);
  }

  WorkPtr barrier(const c10d::BarrierOptions& opts) override {
    return track(gloo_->barrier(opts), {}, c10d::OpType::BARRIER, Aliases());
  }

  c10::intrusive_ptr<c10d::Backend> gloo() const {
    return gloo_;
  }

 private:
  WorkPtr track(
      WorkPtr gloo_work,
      std::vector<at::Tensor> outputs,
      c10d::OpType type,
      const Aliases& aliases) {
    WorkPtr work = c10::make_intrusive<MydevWork>(
        std::move(gloo_work), std::move(outputs), type, aliases.copy_back());
    if (coalescing_) {
      pending_.push_back(work);
    }
    return work;
  }

  c10::intrusive_ptr<c10d::Backend> gloo_;
  bool coalescing_ = false;
  std::vector<WorkPtr> pending_;
};

}  // namespace

void init_c10d(pybind11::module& m) {
  pybind11::object base = pybind11::module::import("torch._C._distributed_c10d").attr("Backend");
  pybind11::class_<MydevBackend, c10::intrusive_ptr<MydevBackend>>(m, "_MydevBackend", base)
      .def(pybind11::init<c10::intrusive_ptr<c10d::Backend>>(), pybind11::arg("gloo"))
      .def_property_readonly("gloo", &MydevBackend::gloo);
}

}  // namespace mydev
