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
    "Helper": ("host", "Helper"),
    "HostResult": ("host", "HostResult"),
    "run_argv": ("host", "run_argv"),
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
    from sandbox.choose import (
        RUNNERS as RUNNERS,
        configured_runner as configured_runner,
        limits_from as limits_from,
        make_runner as make_runner,
    )
    from sandbox.escapes import PROBES as PROBES, Probe as Probe, Verdict as Verdict, check as check_escapes
    from sandbox.git import GitError as GitError, run_git as run_git
    from sandbox.host import (
        Helper as Helper,
        HostResult as HostResult,
        run_argv as run_argv,
        run_program as run_program,
        run_shell as run_shell,
    )
    from sandbox.python import python_request as python_request, shell_request as shell_request
    from sandbox.runner import (
        Limits as Limits,
        OutputLimit as OutputLimit,
        Process as Process,
        Request as Request,
        Result as Result,
        Runner as Runner,
        SandboxError as SandboxError,
        SandboxUnavailable as SandboxUnavailable,
        Usage as Usage,
        environment as environment,
        run_blocking as run_blocking,
    )

    # Renamed imports are not exports to a type checker unless __all__ names them.
    __all__ += [
        "check_escapes",
    ]
