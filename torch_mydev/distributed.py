"""The ``mydev`` c10d backend: gloo's collectives run on CPU aliases of mydev memory.

mydev memory is host memory, so a CPU tensor over the same bytes (``_C._cpu_alias``) is the
mydev tensor as gloo can see it: each collective hands gloo those aliases and gloo reads and
writes the mydev buffers in place, with no copy. Only a tensor gloo cannot take as it is (not
contiguous) goes through a contiguous CPU temporary, copied back when the collective ends.

``MydevGlooGroup`` is a Python ``ProcessGroup`` (torch's ``PyProcessGroup`` trampoline lets
C++ callers such as DDP's reducer reach its methods) wrapping one ``ProcessGroupGloo`` over
the same store. CPU tensors pass straight through, so ``"cpu:gloo,mydev:mydev"`` and a
group created for mydev alone both serve CPU and mydev tensors. Every ``Work`` it returns
completes with the caller's tensors, never the aliases: DDP builds its gradient views from
the future's value, which must stay on mydev.

Registered as the backend ``"mydev"`` for the device ``mydev``
(``Backend.register_backend(..., devices=["mydev"])``), so ``init_process_group()`` with no
backend picks it on a machine whose accelerator is mydev. Mirrors what torch's gloo does for
CPU tensors (torch/csrc/distributed/c10d/ProcessGroupGloo.cpp); collectives gloo lacks for
tensors (reduce-scatter of one flat tensor) are composed from the ones it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (
    AllgatherOptions,
    AllreduceCoalescedOptions,
    AllreduceOptions,
    AllToAllOptions,
    BarrierOptions,
    BroadcastOptions,
    ProcessGroupGloo,
    ReduceScatterOptions,
    _create_work_from_future,
)
from torch.futures import Future

from torch_mydev import _C
from torch_mydev._names import DEVICE

__all__ = ["BACKEND", "MydevGlooGroup", "register"]

BACKEND = "mydev"


class _Aliases:
    """CPU views of one collective's tensors, and what must be copied back afterwards."""

    def __init__(self) -> None:
        self.copy_back: list[tuple[torch.Tensor, torch.Tensor]] = []

    def cpu(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` as gloo takes it: itself on CPU, else a contiguous CPU alias or temporary."""
        if tensor.device.type != DEVICE:
            return tensor
        alias = _C._cpu_alias(tensor)
        if alias.is_contiguous() and not alias.is_conj() and not alias.is_neg():
            return alias
        temporary = alias.resolve_conj().resolve_neg().contiguous()
        self.copy_back.append((alias, temporary))
        return temporary

    def cpus(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        return [self.cpu(t) for t in tensors]

    def finish(self) -> None:
        for alias, temporary in self.copy_back:
            alias.copy_(temporary)


def _work(gloo_work: Any, aliases: _Aliases, result: Any) -> Any:
    """A Work that completes, after ``gloo_work``, with ``result`` (the caller's tensors).

    gloo's point-to-point works have no future: those are waited for here, and the returned
    Work is already complete.
    """

    def done(completed: Future) -> Any:
        completed.value()  # raises gloo's error, if any
        aliases.finish()
        return result

    if not _has_future(gloo_work):
        gloo_work.wait()
        future: Future = Future()
        aliases.finish()
        future.set_result(result)
        return _create_work_from_future(future)
    return _create_work_from_future(gloo_work.get_future().then(done))


def _joined(works: list[Any], result: Any) -> Any:
    """A Work that completes with ``result`` once every one of ``works`` has."""

    def done(completed: Future) -> Any:
        for future in completed.value():
            future.value()  # raises the first error, if any
        return result

    futures = [work.get_future() for work in works]
    return _create_work_from_future(torch.futures.collect_all(futures).then(done))


def _has_future(work: Any) -> bool:
    try:
        work.get_future()
    except RuntimeError:  # "Work::getFuture not implemented" (gloo's send/recv)
        return False
    return True


class MydevGlooGroup(dist.ProcessGroup):
    """A process group for mydev (and CPU) tensors that runs gloo on CPU aliases."""

    def __init__(self, store: Any, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)
        self._gloo = ProcessGroupGloo(store, rank, size, timeout)
        self._name = ""
        self._desc = ""

    # c10d keeps a group's name on its C++ backends, and a Python group has none
    # ("ProcessGroup name not set" from DeviceMesh, hence FSDP2): keep them here.
    def _set_group_name(self, name: str) -> None:
        self._name = name

    @property
    def group_name(self) -> str:
        if not self._name:
            raise RuntimeError("ProcessGroup name not set")
        return self._name

    def _set_group_desc(self, desc: str) -> None:
        self._desc = desc

    @property
    def group_desc(self) -> str:
        return self._desc

    def getBackendName(self) -> str:
        return BACKEND

    @property
    def gloo(self) -> ProcessGroupGloo:
        """The gloo process group that does the communication."""
        return self._gloo

    def broadcast(self, tensors: list[torch.Tensor], opts: BroadcastOptions) -> Any:
        aliases = _Aliases()
        return _work(self._gloo.broadcast(aliases.cpus(tensors), opts), aliases, tensors)

    def allreduce(self, tensors: list[torch.Tensor], opts: AllreduceOptions) -> Any:
        aliases = _Aliases()
        return _work(self._gloo.allreduce(aliases.cpus(tensors), opts), aliases, tensors)

    def allreduce_coalesced(
        self, tensors: list[torch.Tensor], opts: AllreduceCoalescedOptions
    ) -> Any:
        aliases = _Aliases()
        gloo_work = self._gloo.allreduce_coalesced(aliases.cpus(tensors), opts)
        return _work(gloo_work, aliases, tensors)

    def reduce(self, tensors: list[torch.Tensor], opts: Any) -> Any:
        aliases = _Aliases()
        return _work(self._gloo.reduce(aliases.cpus(tensors), opts), aliases, tensors)

    def allgather(
        self,
        outputs: list[list[torch.Tensor]],
        inputs: list[torch.Tensor],
        opts: AllgatherOptions = AllgatherOptions(),  # noqa: B008 (torch's default)
    ) -> Any:
        aliases = _Aliases()
        cpu_outputs = [aliases.cpus(group) for group in outputs]
        gloo_work = self._gloo.allgather(cpu_outputs, aliases.cpus(inputs), opts)
        return _work(gloo_work, aliases, outputs)

    def all_gather_single(
        self,
        output: torch.Tensor,
        input: torch.Tensor,
        opts: AllgatherOptions = AllgatherOptions(),  # noqa: B008
    ) -> Any:
        aliases = _Aliases()
        gloo_work = self._gloo._allgather_base(aliases.cpu(output), aliases.cpu(input), opts)
        return _work(gloo_work, aliases, output)

    def gather(self, outputs: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts) -> Any:
        aliases = _Aliases()
        cpu_outputs = [aliases.cpus(group) for group in outputs]
        gloo_work = self._gloo.gather(cpu_outputs, aliases.cpus(inputs), opts)
        return _work(gloo_work, aliases, outputs)

    def scatter(self, outputs: list[torch.Tensor], inputs: list[list[torch.Tensor]], opts) -> Any:
        aliases = _Aliases()
        cpu_inputs = [aliases.cpus(group) for group in inputs]
        gloo_work = self._gloo.scatter(aliases.cpus(outputs), cpu_inputs, opts)
        return _work(gloo_work, aliases, outputs)

    def reduce_scatter(
        self,
        outputs: list[torch.Tensor],
        inputs: list[list[torch.Tensor]],
        opts: ReduceScatterOptions = ReduceScatterOptions(),  # noqa: B008
    ) -> Any:
        aliases = _Aliases()
        cpu_inputs = [aliases.cpus(group) for group in inputs]
        gloo_work = self._gloo.reduce_scatter(aliases.cpus(outputs), cpu_inputs, opts)
        return _work(gloo_work, aliases, outputs)

    def reduce_scatter_single(
        self,
        output: torch.Tensor,
        input: torch.Tensor,
        opts: ReduceScatterOptions = ReduceScatterOptions(),  # noqa: B008
    ) -> Any:
        """gloo has no flat reduce-scatter: all-reduce a CPU copy, keep this rank's chunk."""
        aliases = _Aliases()
        reduced = _C._cpu_alias(input).clone() if input.device.type == DEVICE else input.clone()
        reduce_opts = AllreduceOptions()
        reduce_opts.reduceOp = opts.reduceOp
        gloo_work = self._gloo.allreduce([reduced], reduce_opts)
        target = aliases.cpu(output)

        def done(completed: Future) -> Any:
            completed.value()
            target.copy_(reduced.reshape(self.size(), -1)[self.rank()].view_as(target))
            aliases.finish()
            return output

        return _create_work_from_future(gloo_work.get_future().then(done))

    def all_gather_single_coalesced(
        self,
        outputs: list[torch.Tensor],
        inputs: list[torch.Tensor],
        opts: AllgatherOptions = AllgatherOptions(),  # noqa: B008
    ) -> Any:
        """``all_gather_single`` of each pair, in order; one Work for all (what
        ``dist._coalescing_manager`` issues for ``all_gather_into_tensor`` calls)."""
        pairs = zip(outputs, inputs, strict=True)
        return _joined([self.all_gather_single(o, i, opts) for o, i in pairs], outputs)

    def reduce_scatter_single_coalesced(
        self,
        outputs: list[torch.Tensor],
        inputs: list[torch.Tensor],
        opts: ReduceScatterOptions = ReduceScatterOptions(),  # noqa: B008
    ) -> Any:
        """``reduce_scatter_single`` of each pair, in order; one Work for all."""
        pairs = zip(outputs, inputs, strict=True)
        return _joined([self.reduce_scatter_single(o, i, opts) for o, i in pairs], outputs)

    def all_to_all_single(
        self,
        output: torch.Tensor,
        input: torch.Tensor,
        output_split_sizes: list[int],
        input_split_sizes: list[int],
        opts: AllToAllOptions = AllToAllOptions(),  # noqa: B008
    ) -> Any:
        aliases = _Aliases()
        gloo_work = self._gloo.alltoall_base(
            aliases.cpu(output), aliases.cpu(input), output_split_sizes, input_split_sizes, opts
        )
        return _work(gloo_work, aliases, output)

    def barrier(self, opts: BarrierOptions = BarrierOptions()) -> Any:  # noqa: B008
        return _work(self._gloo.barrier(opts), _Aliases(), None)

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int) -> Any:
        aliases = _Aliases()
        return _work(self._gloo.send(aliases.cpus(tensors), dst, tag), aliases, tensors)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> Any:
        aliases = _Aliases()
        return _work(self._gloo.recv(aliases.cpus(tensors), src, tag), aliases, tensors)


def _create(store: Any, rank: int, size: int, timeout: timedelta) -> MydevGlooGroup:
    return MydevGlooGroup(store, rank, size, timeout)


def register() -> None:
    """Make ``"mydev"`` a c10d backend and the default one for the mydev device."""
    if not dist.is_available() or BACKEND.upper() in dist.Backend._plugins:
        return
    dist.Backend.register_backend(BACKEND, _create, devices=[DEVICE])
