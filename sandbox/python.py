"""Running Python in a sandbox: the interpreter agentd itself runs on, read-only.

Only the installation is mounted (its prefix, and a virtual environment's own
site-packages when there is one), never the home directory it may live under. Packages
a run needs from elsewhere (a checkout's) are mounted one directory each and put on
PYTHONPATH, so nothing else beside them is seen.
"""

from __future__ import annotations

import importlib.util
import site
import sys
from pathlib import Path

from sandbox.runner import Limits, Request, environment


def executable() -> str:
    """The base interpreter (a virtual environment's python is a link to it)."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    return str(base if base.is_relative_to(sys.base_prefix) else Path(sys.base_prefix, "bin", base.name))


def installation() -> tuple[Path, ...]:
    """The read-only paths the interpreter needs: its prefix, and a virtual
    environment's own site-packages (the environment's other files are left out)."""
    paths = [Path(sys.base_prefix)]
    if sys.prefix != sys.base_prefix:
        paths += [
            Path(p) for p in site.getsitepackages() if Path(p).is_dir() and not Path(p).is_relative_to(sys.base_prefix)
        ]
    return tuple(paths)


def package_dirs(*names: str) -> tuple[Path, ...]:
    """The directory of each top-level package named, as this interpreter finds it."""
    found = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise ValueError(f"no package named {name!r} is importable here")
        found.append(Path(next(iter(spec.submodule_search_locations))).resolve())
    return tuple(found)


def python_request(
    args: tuple[str, ...], packages: tuple[str, ...] = (), limits: Limits | None = None, **env: str
) -> Request:
    """`python ARGS...` as a sandboxed run, with `packages` importable and nothing else."""
    dirs = package_dirs(*packages)
    extra = tuple(p for p in installation() if p != Path(sys.base_prefix))
    path = [*dict.fromkeys(str(d.parent) for d in dirs), *map(str, extra)]
    if path:
        env = {"PYTHONPATH": ":".join(path), **env}
    return Request(
        argv=(executable(), *args),
        readable=(*installation(), *dirs),
        env=environment(PYTHONDONTWRITEBYTECODE="1", **env),
        limits=limits,
    )


def shell_request(
    command: str,
    folder: Path,
    writable: bool = False,
    readable: tuple[Path, ...] = (),
    limits: Limits | None = None,
    **env: str,
) -> Request:
    """`sh -c COMMAND` in `folder` (read-only unless `writable`), with this interpreter
    first on the search path as `python3` and `folder` first on PYTHONPATH: how a
    build, a test or a candidate given as a command line runs agentd's own Python.

    What it writes is readable by all (umask 022, whatever agentd's own): each run is a
    uid of its own, and the test and the candidate read what the build made. Under
    agentd's umask 077 they could not, so the build's bytecode went unused and every
    candidate compiled agentd again."""
    base = python_request(("-c", ""), limits=limits)
    python_path = ":".join([str(folder), *filter(None, [base.env.get("PYTHONPATH", "")])])
    search = f"{Path(sys.base_prefix, 'bin')}:{base.env['PATH']}"
    return Request(
        argv=("/bin/sh", "-c", f"umask 022; {command}"),
        tree=None if writable else folder,
        writable=folder if writable else None,
        readable=(*base.readable, *readable),
        cwd=str(folder),
        env={**base.env, "PATH": search, "PYTHONPATH": python_path, **env},
        limits=limits,
    )
