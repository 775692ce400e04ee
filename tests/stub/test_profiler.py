"""Profiling mydev: the PrivateUse1 profiler stubs (csrc_stub/runtime/profiler.cpp) make the legacy
profiler (``torch.autograd.profiler.profile(use_device="mydev")``) quiet and its times sane,
and ``torch.profiler.profile`` with the PrivateUse1 activity works."""

import torch
from torch.profiler import ProfilerActivity, profile

from tests.support.subprocess_run import AUTOLOAD, run_python

WARNING = "used in profiler but not enabled"


def _work():
    x = torch.randn(32, 32, device="mydev")
    for _ in range(5):
        y = x + x
        z = torch.sin(y)  # a fallback op: nested CPU ops inside a mydev op
        w = z @ x
    return w.cpu()


def _check_times(events):
    assert len(events) > 0
    for e in events:
        assert e.cpu_time_total >= 0, (e.name, e.cpu_time_total)
        assert e.self_cpu_time_total >= 0, (e.name, e.self_cpu_time_total)
        assert e.device_time_total >= 0, (e.name, e.device_time_total)


def test_legacy_profiler_with_mydev_device(capfd):
    _work()  # compile the kernels outside the profile
    with torch.autograd.profiler.profile(use_device="mydev") as prof:
        _work()
    assert WARNING not in capfd.readouterr().err
    events = prof.function_events
    _check_times(events)
    adds = [e for e in events if e.name == "aten::add"]
    # one device interval per op at most; torch keeps it only when its duration is positive,
    # and an op of about a microsecond (a replayed add, an empty) sometimes measures 0 here
    assert adds and all(len(e.kernels) <= 1 for e in adds) and any(e.kernels for e in adds)
    # each op's mydev time is measured by the stubs' events: host time between enter and exit
    assert sum(e.device_time_total for e in adds) > 0
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=5)
    assert "MYDEV" in table.upper()


def test_torch_profiler_with_privateuse1_activity(capfd):
    _work()
    activities = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    with profile(activities=activities, profile_memory=True, record_shapes=True) as prof:
        _work()
    assert WARNING not in capfd.readouterr().err
    _check_times(prof.events())
    names = {e.name for e in prof.events()}
    assert {"aten::add", "aten::sin", "aten::mm"} <= names
    prof.key_averages().table(row_limit=3)


def test_torch_default_stubs_still_warn():
    """The assumption behind csrc_stub/runtime/profiler.cpp: without a registration, torch 2.13's
    DefaultStubs (torch/csrc/profiler/stubs/base.cpp) fail on every op. A renamed
    PrivateUse1 backend without our stub shows it."""
    code = (
        "import torch\n"
        "torch.utils.rename_privateuse1_backend('nostub')\n"
        "with torch.autograd.profiler.profile(use_device='nostub') as p:\n"
        "    torch.ones(2) + 1\n"
    )
    out = run_python(code, env={AUTOLOAD: "0"})
    assert WARNING in out.stderr


def test_profile_memory_reports_mydev_allocations_and_frees():
    """The allocator reports each allocation and free with profile_memory=True, as CUDA's
    caching allocator does (c10::reportMemoryUsageToProfiler), on the block's device."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        x = torch.ones(1000, device="mydev")
        y = x + 1
        del x, y
    owned = {e.name: e.self_device_memory_usage for e in prof.events() if e.name != "[memory]"}
    assert owned["aten::empty"] == 4000 and owned["aten::add"] == 4000, owned
    frees = [e.device_memory_usage for e in prof.events() if e.name == "[memory]"]
    assert sorted(f for f in frees if f) == [-4000, -4000], frees
