"""Sandboxed builds, tests and candidates: one `Runner` interface, a bubblewrap runner and
a Docker runner, the seccomp filter and the escape probes both must hold against.
Imports nothing of the project.

This is the surface the layers above use. Names load on first use, so a harness that
only needs the interface never imports the Docker SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> (module, its name there); no public name is a submodule's.
_SURFACE: dict[str, tuple[str, str]] = {
    "Limits": ("runner", "Limits"),
    "OutputLimit": ("runner", "OutputLimit"),
    "Process": ("runner", "Process"),
    "Request": ("runner", "Request"),
    "Result": ("runner", "Result"),
    "Runner": ("runner", "Runner"),
    "SandboxError": ("runner", "SandboxError"),
    "SandboxUnavailable": ("runner", "SandboxUnavailable"),
    "Usage": ("runner", "Usage"),
    "environment": ("runner", "environment"),
    "run_blocking": ("runner", "run_blocking"),
    "RUNNERS": ("choose", "RUNNERS"),
    "configured_runner": ("choose", "configured_runner"),
    "limits_from": ("choose", "limits_from"),
    "make_runner": ("choose", "make_runner"),
    "python_request": ("python", "python_request"),
    "shell_request": ("python", "shell_request"),
    "GitError": ("git", "GitError"),
    "run_git": ("git", "run_git"),
    "HostResult": ("host", "HostResult"),
    "run_program": ("host", "run_program"),
    "run_shell": ("host", "run_shell"),
    "PROBES": ("escapes", "PROBES"),
    "Probe": ("escapes", "Probe"),
    "Verdict": ("escapes", "Verdict"),
    "check_escapes": ("escapes", "check"),
}

__all__ = sorted(_SURFACE)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _SURFACE[name]
    except KeyError:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"sandbox.{module}"), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from sandbox.choose import RUNNERS, configured_runner, limits_from, make_runner
    from sandbox.escapes import PROBES, Probe, Verdict
    from sandbox.escapes import check as check_escapes
    from sandbox.git import GitError, run_git
    from sandbox.host import HostResult, run_program, run_shell
    from sandbox.python import python_request, shell_request
    from sandbox.runner import (
        Limits,
        OutputLimit,
        Process,
        Request,
        Result,
        Runner,
        SandboxError,
        SandboxUnavailable,
        Usage,
        environment,
        run_blocking,
    )
