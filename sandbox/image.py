"""The Docker runner's image, made offline: no registry is reachable, so it is a root
file system built here and brought in with `docker import`.

It holds the mount points, a two-line /etc/passwd, and the host's merged-/usr links
(/bin -> usr/bin, ...; not /sbin, where the engine puts its init); /usr and the paths a run names are mounted read-only from the
host at run time, as the bubblewrap runner does. The tar is made the same byte for
byte from the same inputs, and the image is tagged by its digest, so it is imported
once and found again after that.
"""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path
from typing import Any

REPOSITORY = "agentd-sandbox"
# /sbin is a directory of its own: the engine mounts its init there.
DIRS = {"tmp": 0o1777, "proc": 0o555, "dev": 0o755, "sys": 0o555, "etc": 0o755, "usr": 0o755, "sbin": 0o755}
PASSWD = b"root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"


def rootfs() -> bytes:
    """The root file system as a tar, the same bytes for the same host links."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, mode in sorted(DIRS.items()):
            tar.addfile(_entry(name, tarfile.DIRTYPE, mode))
        for name in ("bin", "lib", "lib32", "lib64", "libx32"):
            if Path("/", name).is_symlink():
                link = _entry(name, tarfile.SYMTYPE, 0o777)
                link.linkname = os.readlink(Path("/", name))
                tar.addfile(link)
        passwd = _entry("etc/passwd", tarfile.REGTYPE, 0o644)
        passwd.size = len(PASSWD)
        tar.addfile(passwd, io.BytesIO(PASSWD))
    return buffer.getvalue()


def _entry(name: str, kind: bytes, mode: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime, info.uid, info.gid = kind, mode, 0, 0, 0
    return info


def tag_for(data: bytes) -> str:
    return f"{REPOSITORY}:{hashlib.sha256(data).hexdigest()[:16]}"


def ensure_image(client: Any) -> str:  # a docker SDK client, which ships no types
    """The image's tag, imported first if the engine does not have it yet."""
    import docker.errors

    data = rootfs()
    tag = tag_for(data)
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        repository, version = tag.split(":")
        client.api.import_image_from_data(data, repository=repository, tag=version)
        client.images.get(tag)
    return tag
