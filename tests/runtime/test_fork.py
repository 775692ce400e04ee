"""Fork poisoning and lazy initialisation (torch_mydev/runtime/lazy_init.py,
csrc_stub/runtime/lazy_init.cpp).

Truth: CUDA's rules (``torch.cuda._lazy_init``, ``_is_in_bad_fork``) and OpenReg's
``test_device_poison_fork``: a child forked from a process that had initialised the device
raises "Cannot re-initialize ... in forked subprocess" when it uses the device; a child of a
process that never initialised it may use it.

Every child is a real ``os.fork``: it reports through a pipe and leaves with ``os._exit``,
and makes only device calls (after an OpenMP region in the parent, CPU ops in a forked
child can hang: docs, design.md). A child's result is read whole before ``waitpid``.
"""

import json
import os

import pytest
import torch

from tests.support.subprocess_run import run_python

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

MESSAGE = (
    "Cannot re-initialize mydev in forked subprocess. To use mydev with multiprocessing, "
    "you must use the 'spawn' start method"
)


def _in_child(calls):
    """Fork; in the child, run each ``(name, call)`` and send back ``{name: outcome}`` (a
    value, or the exception's type and message). The parent returns that dict."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: device calls only, then _exit (no atexit, no pytest teardown)
        os.close(read)
        outcomes = {}
        for name, call in calls:
            try:
                outcomes[name] = ["ok", call()]
            except Exception as error:  # the outcome is what is compared
                outcomes[name] = [type(error).__name__, str(error)]
        os.write(write, json.dumps(outcomes).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(data)


def test_child_of_an_initialised_parent_is_poisoned():
    torch.mydev.init()
    assert torch.mydev.is_initialized() and not torch.mydev._is_in_bad_fork()
    cpu = torch.arange(3.0)  # made here: the child runs no CPU op
    outcomes = _in_child(
        [
            ("bad_fork", torch.mydev._is_in_bad_fork),
            ("is_initialized", torch.mydev.is_initialized),
            ("init", torch.mydev.init),
            ("empty", lambda: torch.empty(2, device="mydev").shape[0]),
            ("to", lambda: cpu.to("mydev").shape[0]),
            ("set_device", lambda: torch.mydev.set_device(0)),
            ("current_device", torch.mydev.current_device),
            ("get_rng_state", lambda: torch.mydev.get_rng_state().shape[0]),
        ]
    )
    assert outcomes.pop("bad_fork") == ["ok", True]
    assert outcomes.pop("is_initialized") == ["ok", False]
    for name, outcome in outcomes.items():
        assert outcome == ["RuntimeError", MESSAGE], name
    # the parent is unchanged
    assert torch.mydev.is_initialized() and not torch.mydev._is_in_bad_fork()
    assert torch.empty(2, device="mydev").device.type == "mydev"


def test_manual_seed_in_a_poisoned_child_leaves_mydev_alone():
    """``torch.manual_seed`` (DataLoader workers call it) asks ``_is_in_bad_fork`` and skips
    a poisoned device, as it skips CUDA: the child's mydev generator keeps the parent's seed."""
    torch.mydev.init()
    seed = torch.mydev.initial_seed()
    outcomes = _in_child(
        [("seed", lambda: [torch.manual_seed(seed + 1).initial_seed(), torch.mydev.initial_seed()])]
    )
    assert outcomes == {"seed": ["ok", [seed + 1, seed]]}


# The parent of the second case must never have used mydev, so it is a fresh interpreter.
_FRESH_PARENT = r"""
import json, os, sys
import torch

def child(report):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            result = report()
        except Exception as error:
            result = [type(error).__name__, str(error)]
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data)

def use():
    before = [torch.mydev._is_in_bad_fork(), torch.mydev.is_initialized()]
    t = torch.empty(3, device="mydev:1")
    return ["ok", before, str(t.device), torch.mydev.is_initialized()]

first = child(use)                      # the parent has not initialised mydev
parent = [torch.mydev.is_initialized(), torch.mydev._initialized]
torch.empty(1, device="mydev")           # now it has
second = child(use)
print(json.dumps([first, parent, second]))
"""


def test_child_of_a_parent_that_never_initialised_may_use_mydev():
    done = run_python(_FRESH_PARENT)
    first, parent, second = json.loads(done.stdout.strip().splitlines()[-1])
    assert first == ["ok", [False, False], "mydev:1", True]
    assert parent == [False, False]  # the child's use did not initialise the parent
    assert second == ["RuntimeError", MESSAGE]


def test_lazy_init_is_what_factories_call():
    """``device_lazy_init`` (torch's factories) calls ``torch.mydev._lazy_init`` once per
    process; ``_initialized`` stays what ``torch.utils.checkpoint`` reads."""
    code = (
        "import torch; m = torch.mydev; a = (m._initialized, m.is_initialized());"
        "calls = []; real = m._lazy_init\n"
        "def spy():\n    calls.append(1); real()\n"
        "m._lazy_init = spy; torch.empty(1, device='mydev'); torch.empty(1, device='mydev');"
        "print(a, m._initialized, m.is_initialized(), len(calls))"
    )
    done = run_python(code)
    assert done.stdout.strip() == "(False, False) True True 1"
