"""FSDP1 wraps a model still on CPU with ``device_id=mydev``: it moves the parameters itself.

``torch.distributed.fsdp._init_utils._move_states_to_device`` moves each parameter with
``param.data = param.to(device)``, which needs ``_has_compatible_shallow_copy_type`` to say
yes for a CPU parameter taking mydev data (``ops/tensor_type.py``), as it does for CUDA.
Truth: one process on the whole batch on CPU (``test_distributed._one_process``).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

import torch_mydev  # noqa: F401
from tests.distributed.test_distributed import WORLD, _data, _model, _one_process, _spawn


def _fsdp1_from_cpu(rank: int, init: str, out_dir: str) -> None:
    from torch.distributed.fsdp import FullyShardedDataParallel

    dist.init_process_group(init_method=init, rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    fsdp = FullyShardedDataParallel(_model(), device_id=torch.device("mydev", 0))
    optimizer = torch.optim.SGD(fsdp.parameters(), lr=0.1)
    batch, target = _data()
    for _ in range(2):
        rows = slice(rank * 4, rank * 4 + 4)
        loss = torch.nn.functional.mse_loss(fsdp(batch[rows].to("mydev")), target[rows].to("mydev"))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with FullyShardedDataParallel.summon_full_params(fsdp):
        params = [p.detach().cpu() for p in fsdp.parameters()]
        on = {p.device.type for p in fsdp.parameters()}
    torch.save({"params": params, "on": on}, f"{out_dir}/fsdp1_cpu_{rank}.pt")
    dist.destroy_process_group()


def test_fsdp1_moves_a_cpu_model_to_mydev_and_matches_one_process(tmp_path):
    _spawn(_fsdp1_from_cpu, str(tmp_path))
    model = _one_process()
    for rank in range(WORLD):
        seen = torch.load(tmp_path / f"fsdp1_cpu_{rank}.pt")
        assert seen["on"] == {"mydev"}
        for got, expected in zip(seen["params"], model.parameters(), strict=True):
            torch.testing.assert_close(got, expected.detach(), rtol=1e-6, atol=1e-6)
