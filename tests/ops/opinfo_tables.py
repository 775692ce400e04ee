"""What of PyTorch's OpInfo database does not run on mydev, and why (read by test_opinfo.py).

`EXCLUDED` is the list a user reads: docs/opinfo.md shows the same entries (a test checks that
the two agree). `XFAILS` are bugs: each is a strict xfail, so a fix turns it into a failure that
asks for the entry to be removed.
"""

from __future__ import annotations

# OpInfo entry (`name` or `name:variant`) -> why it is left out.
EXCLUDED: dict[str, str] = {
    "sparse.mm:reduce": "sparse CSR inputs: mydev has strided tensors only",
    "sparse.sampled_addmm": "sparse CSR inputs: mydev has strided tensors only",
    "to_sparse": "sparse COO/CSR outputs: mydev has strided tensors only",
}

# Ops whose output values torch leaves undefined: only dtype, shape, strides, device compared.
UNDEFINED_VALUES: frozenset[str] = frozenset(
    {"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"}
)

# (OpInfo entry, dtype name or None for every dtype) -> (owner, bug and one-line repro).
XFAILS: dict[tuple[str, str | None], tuple[str, str]] = {}

# OpInfo entry -> positions in `sample.args` of tensors torch requires on CPU whatever the
# device (CUDA raises the same error for a device tensor there).
CPU_ARGUMENTS: dict[str, tuple[int, ...]] = {"tensor_split": (0,)}

# Ops whose CPU result depends on where the data sit (LAPACK gelsy rounds differently for the
# same values in another allocation, seen run to run on CPU alone): values within tolerance.
ADDRESS_DEPENDENT: frozenset[str] = frozenset({"linalg.lstsq", "linalg.lstsq:grad_oriented"})

# Ops whose values torch computes by a per-device policy: `LinearCrossEntropyOptions` with
# `acc_policy="auto"` resolves to "accurate" only for ("cpu", bfloat16/float16)
# (torch/nn/modules/linear_cross_entropy_options.py), so any other device, CUDA included, rounds
# differently. Only dtype, shape, strides, device compared.
DEVICE_POLICY: frozenset[str] = frozenset(
    {
        "nn.functional.linear_cross_entropy:chunked",
        "nn.functional.linear_cross_entropy:chunked_none",
    }
)
