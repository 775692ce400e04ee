"""Runs Python in a fresh interpreter: what a test needs when the thing it checks happens
once per process (an import, numba's first load, autoload, a process exit).

One function, ``run_python``: a ``-c`` snippet or a script file, the parent's environment
with overrides (a value of ``None`` removes the variable, as tests that need torch's own
autoload remove ``TORCH_DEVICE_BACKEND_AUTOLOAD``), a timeout, and by default an assertion
that the process exited 0 whose message carries the exit status and the tail of stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

# The variable that turns torch's device autoload off; tests that need autoload unset it.
AUTOLOAD = "TORCH_DEVICE_BACKEND_AUTOLOAD"


def environment(overrides: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """``os.environ`` with ``overrides`` applied: a string sets a variable, None removes it."""
    env = dict(os.environ)
    for name, value in (overrides or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def run_python(
    code: str | None = None,
    *,
    script: str | Path | None = None,
    args: Sequence[str] = (),
    flags: Sequence[str] = (),
    env: Mapping[str, str | None] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 600,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` (``python -c``) or ``script`` with ``args`` in a new interpreter
    (``sys.executable``, interpreter ``flags`` such as ``("-W", "default")`` first), with
    the environment ``environment(env)``; stdout and stderr are captured as text.

    With ``check`` the exit status must be 0 (an AssertionError names the status and the
    last 4,000 characters of stderr); without it the caller reads ``returncode`` itself.
    """
    if (code is None) == (script is None):
        raise TypeError("run_python takes code or script, exactly one")
    command = [sys.executable, *flags]
    command += ["-c", code] if code is not None else [str(script)]
    done = subprocess.run(
        [*command, *args],
        capture_output=True,
        text=True,
        env=environment(env),
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    if check:
        assert done.returncode == 0, (done.returncode, done.stderr[-4000:])
    return done
