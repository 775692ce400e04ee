"""Bool tensors whose bytes are not 0/1 (``uint8`` storage viewed as bool, issue #11).

torch CPU reads any nonzero byte of a bool as true in every op that loads the value
(comparisons, arithmetic, casts, logical ops, ``where``'s condition); ``where`` moves its bool
*values* unchanged. The truth is the same call on CPU, compared byte for byte
(``view(torch.uint8)``), and each call runs twice (the second through the elementwise entry
cache). Same-dtype copies are compared by value: a bool byte other than 0/1 is undefined
behaviour in C++, and CPU's own copies disagree (its direct copy writes 1, its transposed
copy moves the byte); mydev's copies move bytes.
"""

import pytest
import torch

BYTES = [0, 1, 2, 255, 128, 0, 7, 1]


def _odd_bools(device: str, shape=(8,)) -> torch.Tensor:
    raw = torch.tensor(BYTES * (int(torch.tensor(shape).prod()) // len(BYTES)), dtype=torch.uint8)
    return raw.reshape(shape).to(device).view(torch.bool)


def _bytes(t: torch.Tensor) -> list:
    t = t.cpu()
    return (t.view(torch.uint8) if t.dtype == torch.bool else t).tolist()


CASES = {
    "eq True (issue #11)": lambda b: b == True,  # noqa: E712
    "eq 1": lambda b: b == 1,
    "ne False": lambda b: b != False,  # noqa: E712
    "lt True": lambda b: b < True,
    "eq tensor": lambda b: b == torch.ones_like(b),
    "eq flipped": lambda b: b == b.flip(0),
    "eq out uint8": lambda b: torch.eq(
        b, True, out=torch.empty(8, dtype=torch.uint8, device=b.device)
    ),
    "and": lambda b: b & b,
    "invert": lambda b: ~b,
    "add": lambda b: b + b,
    "mul": lambda b: b * b,
    "add 1": lambda b: b + 1,
    "div": lambda b: b / 2,
    "to int64": lambda b: b.to(torch.int64),
    "to float32": lambda b: b.to(torch.float32),
    "to uint8": lambda b: b.to(torch.uint8),
    "where condition": lambda b: torch.where(b, 10, 20),
    "where values": lambda b: torch.where(b.clone(), b, b[[1, 0, 3, 2, 5, 4, 7, 6]]),
    "fill_ 0-dim": lambda b: torch.empty(3, dtype=torch.bool, device=b.device).fill_(b[2]),
    "sum": lambda b: b.sum(),
    "item": lambda b: torch.tensor([b[k].item() for k in range(8)]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_nonzero_bytes_read_as_true_as_on_cpu(name):
    op = CASES[name]
    want = _bytes(op(_odd_bools("cpu")))
    for _ in range(2):
        assert _bytes(op(_odd_bools("mydev"))) == want, name


COPIES = {
    "clone": lambda b: b.clone(),
    "copy_": lambda b: torch.empty_like(b).copy_(b),
    "copy_ strided": lambda b: torch.empty(4, dtype=torch.bool, device=b.device).copy_(b[::2]),
    "to mydev and back": lambda b: b.cpu().to(b.device),
}


@pytest.mark.parametrize("name", list(COPIES))
def test_copies_keep_the_values_and_every_op_reads_them_as_cpu(name):
    copy = COPIES[name]
    cpu, dev = copy(_odd_bools("cpu")), copy(_odd_bools("mydev"))
    assert torch.equal(dev.cpu().view(torch.uint8) != 0, cpu.view(torch.uint8) != 0)
    assert _bytes(dev == True) == _bytes(cpu == True)  # noqa: E712
    assert _bytes(dev.to(torch.int32)) == _bytes(cpu.to(torch.int32))


@pytest.mark.parametrize("shape", [(64, 64), (2, 300, 300)])
def test_large_and_transposed_bool_copies_read_as_true(shape):
    """Tiled and parallel copies, then a comparison and a cast of what they wrote."""
    for make in (lambda t: t.clone(), lambda t: t.transpose(0, -1).contiguous()):
        cpu, dev = make(_odd_bools("cpu", shape)), make(_odd_bools("mydev", shape))
        assert _bytes(dev == True) == _bytes(cpu == True)  # noqa: E712
        assert _bytes(dev.to(torch.float32)) == _bytes(cpu.to(torch.float32))
