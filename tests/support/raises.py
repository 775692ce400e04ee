"""The "raises like CPU" rule: where torch CPU raises, mydev raises the same exception type
(and, where a caller compares it, the same message).

``run_like_cpu`` runs the truth first and returns both results when it does not raise;
``raises_like_cpu`` is for calls that must raise on both devices. The type is compared
exactly (``type(a) is type(b)``): a subclass of CPU's exception is another exception.
``outcome`` records a call's result or exception type, for tests that compare outcomes
themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _attempt(call: Callable[[], Any]) -> tuple[Any, Exception | None]:
    try:
        return call(), None
    except Exception as error:  # the type (and message) is what is compared
        return None, error


def _assert_alike(cpu: Exception, dev: Exception | None, result: Any, message: bool) -> None:
    assert dev is not None, f"CPU raised {type(cpu).__name__}: {cpu}; mydev returned {result!r}"
    assert type(dev) is type(cpu), (cpu, dev)
    if message:
        assert str(dev) == str(cpu), (str(cpu), str(dev))


def run_like_cpu(
    cpu_call: Callable[[], Any], dev_call: Callable[[], Any], *, message: bool = False
) -> tuple[Any, Any] | None:
    """``cpu_call()`` (the truth), then ``dev_call()``: ``(expected, result)`` when CPU
    returns; when CPU raises, mydev must raise the same exception type (and message, with
    ``message``) and None is returned."""
    expected, cpu_error = _attempt(cpu_call)
    if cpu_error is None:
        return expected, dev_call()
    result, dev_error = _attempt(dev_call)
    _assert_alike(cpu_error, dev_error, result, message)
    return None


def raises_like_cpu(
    cpu_call: Callable[[], Any], dev_call: Callable[[], Any], *, message: bool = False
) -> Exception:
    """Both calls raise: the same exception type (and message, with ``message``); returns
    mydev's exception for further checks."""
    expected, cpu_error = _attempt(cpu_call)
    assert cpu_error is not None, f"CPU did not raise: {expected!r}"
    result, dev_error = _attempt(dev_call)
    _assert_alike(cpu_error, dev_error, result, message)
    return dev_error


def outcome(call: Callable[[], Any]) -> tuple[Any, type[Exception] | None]:
    """``(call(), None)``, or ``(None, the exception's type)`` when the call raises."""
    result, error = _attempt(call)
    return result, None if error is None else type(error)
