"""Running a profile's real tools: Python callables and commands.

A tool that fails answers with its error as text, so the session goes on and the
transcript shows what went wrong; only a tool that cannot be found at all stops a
session before it starts.

A command tool (and a session's `--verify` check) gets only `ALLOWED_ENV` from agentd's
environment: what finding programs, text, time and temporary files need, never a
provider key or the wallet's passphrase.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentd.errors import AgentdError
from agentd.profiles import Profile, ToolSpec
from improver import loads_bounded
from sandbox import run_program

MAX_ANSWER_BYTES = 200_000
# Everything a command tool or a check inherits from agentd's environment.
ALLOWED_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "TMPDIR")

PythonTool = Callable[[dict[str, Any], Path], Any]


class Toolbox:
    """The profile's tools, resolved before the session starts."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self._callables: dict[str, PythonTool] = {}
        for spec in profile.tools:
            if spec.run:
                self._callables[spec.name] = _resolve_callable(profile, spec)
            else:
                _check_command(profile, spec)

    async def call(self, name: str, arguments: str) -> str:
        spec = self.profile.tool(name)
        if spec is None:
            return f"error: there is no tool named {name!r}"
        try:
            args = loads_bounded(arguments or "{}")
        except ValueError as exc:  # not JSON, nested too deep (TooDeep), or a number too long to read
            return f"error: the arguments are not valid JSON ({getattr(exc, 'msg', exc)})"
        if not isinstance(args, dict):
            return "error: the arguments must be a JSON object"
        if spec.run:
            return await self._call_python(spec, args)
        return await _call_command(self.profile.dir, spec, args)

    async def _call_python(self, spec: ToolSpec, args: dict[str, Any]) -> str:
        fn = self._callables[spec.name]
        try:
            result = await asyncio.wait_for(asyncio.to_thread(fn, args, self.profile.dir), spec.timeout)
        except TimeoutError:
            return f"error: the tool took longer than {spec.timeout:g}s"
        except Exception as exc:  # a tool's own failure is the tool's answer, not ours
            return f"error: {type(exc).__name__}: {exc}"
        return _as_text(result)


def _resolve_callable(profile: Profile, spec: ToolSpec) -> PythonTool:
    assert spec.run is not None
    module_name, _, attr = spec.run.partition(":")
    local = profile.dir / (module_name.replace(".", "/") + ".py")
    try:
        if local.is_file():
            unique = f"agentd_profile_{profile.name.replace('-', '_')}_{module_name.replace('.', '_')}"
            module = sys.modules.get(unique) or _load_file(unique, local)
        else:
            module = importlib.import_module(module_name)
    except Exception as exc:
        raise AgentdError(
            f"tool {spec.name!r} of profile {profile.name!r}: cannot import {module_name!r} ({type(exc).__name__}: {exc})"
        ) from None
    fn: object = getattr(module, attr, None)
    if not callable(fn):
        raise AgentdError(f"tool {spec.name!r} of profile {profile.name!r}: {spec.run!r} is not a callable")
    return fn


def _load_file(unique: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(unique, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[unique] = module
    return module


def _check_command(profile: Profile, spec: ToolSpec) -> None:
    assert spec.command
    program = spec.command[0]
    if not (shutil.which(program) or (profile.dir / program).is_file()):
        raise AgentdError(f"tool {spec.name!r} of profile {profile.name!r}: command {program!r} not found")


async def _call_command(folder: Path, spec: ToolSpec, args: dict[str, Any]) -> str:
    assert spec.command
    program = spec.command[0]
    argv = [str(folder / program) if (folder / program).is_file() else program, *spec.command[1:]]
    done = await run_program(
        argv, cwd=folder, env=allowed_environment(), stdin=json.dumps(args).encode(), timeout=spec.timeout
    )
    if done.timed_out:
        return f"error: the tool took longer than {spec.timeout:g}s"
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [""]
        return f"error: the tool exited with status {done.returncode}: {tail[0]}"
    return _as_text(done.stdout.decode(errors="replace").rstrip("\n"))


def allowed_environment(**extra: str) -> dict[str, str]:
    """The ALLOWED_ENV part of agentd's environment, with `extra` added."""
    return {**{name: os.environ[name] for name in ALLOWED_ENV if name in os.environ}, **extra}


# What agentd's own helpers (pip fetching a packaged model, the llama.cpp server) need
# beyond ALLOWED_ENV: where Python finds agentd, and how pip reaches PyPI. Never a key.
HELPER_ENV = (
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "no_proxy",
)


def helper_environment() -> dict[str, str]:
    """The environment agentd's own helper processes get: ALLOWED_ENV, HELPER_ENV and
    pip's own PIP_* settings (an index, a cache), none of agentd's secrets."""
    names = [*HELPER_ENV, *(name for name in os.environ if name.startswith("PIP_"))]
    return allowed_environment(**{name: os.environ[name] for name in names if name in os.environ})


def _as_text(result: Any) -> str:
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    if len(text.encode()) > MAX_ANSWER_BYTES:
        return text.encode()[:MAX_ANSWER_BYTES].decode(errors="ignore") + "\n[answer cut at 200000 bytes]"
    return text
