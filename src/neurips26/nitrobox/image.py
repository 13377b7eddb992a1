"""Images: the shared read-only lower layer every sandbox starts from.

``host``   a small skeleton (``/etc`` essentials, mount points, merged-/usr symlinks) used as the
           overlay lower; the host's ``/usr`` is bind-mounted read-only on top inside the sandbox.
           Nothing is downloaded; built once per state root (owned by the caller, which rootless
           mode needs: copy-up of dirs owned by an unmapped uid fails with EOVERFLOW).
``<dir>``  any rootfs directory (e.g. ``build_debian_image`` with debootstrap, full scale).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from neurips26.nitrobox import _sys
from neurips26.nitrobox.errors import ImageError

HOST_IMAGE_VERSION = "host-v1"
_SKEL_DIRS = {"usr": 0o755, "proc": 0o555, "sys": 0o555, "dev": 0o755, "tmp": 0o1777, "var": 0o755,
              "var/tmp": 0o1777, "var/lib": 0o755, "var/log": 0o755, "var/cache": 0o755, "root": 0o700,
              "home": 0o755, "run": 0o755, "etc": 0o755, "mnt": 0o755, "opt": 0o755, "srv": 0o755,
              "workspace": 0o755}
_ETC_COPY = ("nsswitch.conf", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "os-release",
             "debian_version", "localtime", "mime.types", "ssl")


@dataclass(frozen=True)
class Image:
    """A resolved image: its lower directory and whether the host ``/usr`` is bind-mounted."""

    lower: str
    host_usr: bool
    name: str
    below: tuple = ()              # further read-only layers under ``lower`` (imported images), top first
    config: dict = field(default_factory=dict, compare=False, hash=False)  # OCI config (Env, ...)


def _copy_etc_entry(src: Path, dst: Path) -> None:
    if src.is_symlink():
        os.symlink(os.readlink(src), dst)
    elif src.is_dir():
        shutil.copytree(src, dst, symlinks=True)
    elif src.is_file():
        shutil.copy2(src, dst)


def build_host_skeleton(dest: Path) -> Path:
    """Write the host-image skeleton into ``dest`` (created; must not exist)."""
    dest.mkdir(mode=0o755)
    for d, mode in _SKEL_DIRS.items():
        p = dest / d
        p.mkdir(parents=True, exist_ok=True)
        os.chmod(p, mode)
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / name
        if host.is_symlink():
            os.symlink(os.readlink(host), dest / name)
    etc = dest / "etc"
    (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n"
                                "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
    (etc / "group").write_text("root:x:0:\ntty:x:5:\nnogroup:x:65534:\n")
    (etc / "hostname").write_text("sandbox\n")
    (etc / "hosts").write_text("127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n")
    (etc / "resolv.conf").write_text("")
    for name in _ETC_COPY:
        src = Path("/etc") / name
        if src.exists() or src.is_symlink():
            try:
                _copy_etc_entry(src, etc / name)
            except OSError:
                pass  # best effort: an unreadable /etc entry is not needed to run bash/python
    return dest


def host_image(state_root: str | os.PathLike) -> Image:
    """The ``host`` image under ``state_root/images`` (built atomically on first use)."""
    if not os.path.exists("/usr/bin/sh") or not os.path.exists("/usr/bin/bash"):
        raise ImageError("image 'host' needs the host's /usr/bin/sh and /usr/bin/bash (merged /usr)")
    images = Path(state_root) / "images"
    final = images / HOST_IMAGE_VERSION
    if not (final / "etc" / "passwd").exists():
        images.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=images))
        try:
            build_host_skeleton(tmp / "root")
            try:
                os.rename(tmp / "root", final)
            except OSError:  # another process won the race
                if not (final / "etc" / "passwd").exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return Image(str(final), True, "host")


def resolve_in_image(root: str, path: str) -> bool:
    """Whether ``path`` exists inside ``root`` with symlinks resolved *inside* it (openat2)."""
    try:
        dfd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fd = _sys.openat2(dfd, path.lstrip("/"), os.O_PATH, 0, _sys.RESOLVE_IN_ROOT | _sys.RESOLVE_NO_MAGICLINKS)
        os.close(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(dfd)


def dir_image(path: str | os.PathLike) -> Image:
    """A rootfs directory as an image; ``ImageError`` if it is missing or has no ``/bin/sh``."""
    raw = os.fspath(path)
    p = os.path.abspath(raw)
    if not os.path.isdir(p):
        if isinstance(raw, str) and not raw.startswith(("/", ".")):
            raise ImageError(f"image {raw!r} is neither 'host', a Snapshot nor a rootfs directory; "
                             f"image names (name:tag) need an imported image, and OCI / docker-save "
                             f"import is not implemented yet: pass a rootfs directory")
        raise ImageError(f"image directory {p!r} does not exist")
    if any(c in p for c in ",:"):
        raise ImageError(f"image path {p!r} must not contain ',' or ':' (overlay lowerdir syntax)")
    if not resolve_in_image(p, "bin/sh"):
        raise ImageError(f"image {p!r} has no /bin/sh")
    return Image(p, False, p)


def tree_hash(root: str | os.PathLike) -> str:
    """sha256 over (path, type, mode, size, content or link target) of a tree (COW checks)."""
    h = hashlib.sha256()
    root = os.fspath(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            h.update(os.path.relpath(full, root).encode() + b"\0" + oct(st.st_mode).encode())
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(full).encode())
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def build_debian_image(dest: str | os.PathLike, suite: str = "bookworm", mirror: str | None = None,
                       timeout: float = 900) -> Image:
    """``debootstrap --variant=minbase <suite> DEST <mirror>`` (full scale; ~90 s, 206 MiB).

    The mirror defaults to the one named in ``/etc/apt/sources.list.d/debian.sources``.
    """
    dest = Path(dest)
    if (dest / "bin" / "sh").exists() or (dest / "usr" / "bin" / "sh").exists():
        return dir_image(dest)
    exe = shutil.which("debootstrap")
    if exe is None:
        raise ImageError("building the 'debian' image needs debootstrap (apt install debootstrap)")
    if mirror is None:
        mirror = "http://deb.debian.org/debian"
        try:
            for line in Path("/etc/apt/sources.list.d/debian.sources").read_text().splitlines():
                if line.startswith("URIs:"):
                    mirror = line.split()[1]
                    break
        except OSError:
            pass
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    r = subprocess.run([exe, "--variant=minbase", suite, str(tmp), mirror], capture_output=True,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ImageError(f"debootstrap failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    os.rename(tmp, dest)
    return dir_image(dest)
