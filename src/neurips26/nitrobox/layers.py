"""Frozen layers: ``Snapshot``, snapshot/restore/branch of a sandbox, and the overlay-aware squash.

``LayerOps`` is mixed into ``Sandbox``.
"""

from __future__ import annotations

import os
import stat
import uuid
from dataclasses import dataclass, field
from typing import Any

from neurips26.harness.validation import check_scalar
from neurips26.nitrobox import reaper, runtime
from neurips26.nitrobox.config import SandboxConfig
from neurips26.nitrobox.errors import SandboxError, SnapshotNotFoundError
from neurips26.nitrobox.image import Image


@dataclass
class Snapshot:
    """A frozen state: read-only layers (newest first) over an image. Usable as an image."""

    id: str
    tag: str
    lowers: list
    image: Image
    state_root: str
    _released: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Drop this snapshot's references; layers no one uses any more are unlinked."""
        if not self._released:
            self._released = True
            runtime.layer_refs.release(self.lowers)

    @property
    def released(self) -> bool:
        return self._released


_OPAQUE = "user.overlay.opaque"


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        reaper.force_rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)


def _merge_layer(src: str, dst: str) -> None:
    """Apply overlay layer ``src`` on top of the merged layer ``dst`` (see ``Sandbox._squash``)."""
    import shutil

    for name in sorted(os.listdir(src)):
        s, d = os.path.join(src, name), os.path.join(dst, name)
        st = os.lstat(s)
        if _is_whiteout(st):
            _remove(d)
            os.mknod(d, stat.S_IFCHR | 0o000, 0)
        elif stat.S_ISDIR(st.st_mode):
            try:
                opaque = os.getxattr(s, _OPAQUE, follow_symlinks=False) == b"y"
            except OSError:
                opaque = False
            if os.path.lexists(d) and (opaque or not os.path.isdir(d) or os.path.islink(d)):
                _remove(d)
            if not os.path.lexists(d):
                os.mkdir(d, stat.S_IMODE(st.st_mode))
                if opaque:
                    os.setxattr(d, _OPAQUE, b"y", follow_symlinks=False)
            os.chmod(d, stat.S_IMODE(st.st_mode))
            _merge_layer(s, d)
        else:
            _remove(d)
            if stat.S_ISLNK(st.st_mode):
                os.symlink(os.readlink(s), d)
            else:
                shutil.copy2(s, d, follow_symlinks=False)
        if os.geteuid() == 0:
            os.chown(d, st.st_uid, st.st_gid, follow_symlinks=False)



class LayerOps:
    """snapshot / restore / branch over reference-counted frozen layers."""

    def _set_lowers(self, lowers: list) -> None:
        runtime.layer_refs.acquire(lowers, self._root)
        old = self._lowers
        self._lowers = lowers
        self._layers_held[:] = self._base_lowers + self._lowers
        runtime.layer_refs.release(old)

    def snapshot(self, tag: str | None = None, method: str = "freeze") -> Snapshot:
        """Freeze the current filesystem as a read-only layer (O(1): a rename) and continue on top.

        ``method="freeze"`` restarts the shell (processes are lost, files kept); ``method="copy"``
        copies the upper with ``cp -a`` without restarting (racy while commands run).
        """
        if tag is not None and (not isinstance(tag, str) or not tag or "/" in tag or "\0" in tag):
            raise ValueError(f"tag must be a non-empty str without '/' or NUL, got {tag!r}")
        if method not in ("freeze", "copy"):
            raise ValueError(f"method must be 'freeze' or 'copy', got {method!r}")
        with self._exec_lock, self._life:
            self._check_open()
            lid = uuid.uuid4().hex[:16]
            layer = str(self._root / "layers" / lid)
            upper, _, _ = self._paths()
            disk = bool(self._limits.get("disk"))
            if method == "copy" or disk:
                src = upper
                if disk:  # the upper lives on a tmpfs inside the ns: reach it through B's /proc
                    src = self._disk_upper_path()
                import subprocess

                os.mkdir(layer)
                r = subprocess.run(["cp", "-a", "--reflink=auto", src + "/.", layer + "/"],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    reaper.trash(self._root, layer)
                    raise SandboxError(f"snapshot copy failed: {r.stderr.strip()}")
                if method == "freeze":
                    self._proc.kill()
                    self._fresh_upper()
            else:
                self._proc.kill()
                os.rename(upper, layer)
                _, work, _ = self._paths()
                reaper.trash(self._root, work)
                self._fresh_upper()
            lowers = [layer] + self._lowers
            if len(lowers) > self.config.max_layers:
                lowers = self._squash(lowers)
            self._set_lowers(lowers)
            if self._proc.b_pid is None:
                self._spawn()
            snap = Snapshot(lid, tag or lid, list(lowers), self.image, self._state_root)
            runtime.layer_refs.acquire(snap.lowers, self._root)
            self._snapshots[snap.tag] = snap
            return snap

    def _disk_upper_path(self) -> str:
        """The tmpfs upper exists only inside the sandbox's mount ns: reach it through A's O_PATH fd."""
        return f"/proc/{self._proc.disk_a_pid}/fd/{self._proc.disk_fd}/upper"

    def _squash(self, lowers: list) -> list:
        """Keep the overlay option string short: merge the newest layers into one (O(data) copy).

        Overlay semantics are replayed oldest to newest: a whiteout (char 0/0) deletes and stays a
        whiteout (older layers below may hold the path), an opaque dir (``user.overlay.opaque``)
        replaces the directory, anything else overwrites. Unprivileged whiteout creation is allowed
        since Linux 5.8, so this works rootless too.
        """
        k = len(lowers) - self.config.max_layers + 1
        group, rest = lowers[:k], lowers[k:]
        dest = str(self._root / "layers" / uuid.uuid4().hex[:16])
        os.mkdir(dest)
        try:
            for layer in reversed(group):  # oldest of the group first
                _merge_layer(layer, dest)
        except BaseException:
            reaper.trash(self._root, dest)
            raise
        return [dest] + rest

    def restore(self, snapshot: Snapshot | str) -> None:
        """Kill the tree, start a fresh upper over the snapshot's layers."""
        snap = self._lookup(snapshot)
        with self._exec_lock, self._life:
            self._check_open()
            if snap.image.lower != self.image.lower:
                raise ValueError("snapshot was taken from a different image")
            old = self._retire_tree()
            self._new_upper(old)
            self._set_lowers(list(snap.lowers))
            self._spawn()

    def _lookup(self, snapshot: Snapshot | str) -> Snapshot:
        if isinstance(snapshot, str):
            if snapshot not in self._snapshots:
                raise SnapshotNotFoundError(f"no snapshot tagged {snapshot!r} in sandbox {self.id}")
            snapshot = self._snapshots[snapshot]
        if not isinstance(snapshot, Snapshot):
            raise TypeError(f"snapshot must be a Snapshot or a tag str, got {type(snapshot).__name__}")
        if snapshot.released:
            raise SnapshotNotFoundError(f"snapshot {snapshot.id!r} was released")
        return snapshot

    def branch(self, snapshot: Snapshot | str, n: int = 1, **overrides: Any) -> list:
        """``n`` new sandboxes sharing the snapshot's frozen layers, each with its own empty upper."""
        snap = self._lookup(snapshot)
        n = check_scalar(n, "n", int, min=1)
        kw = {k: getattr(self.config, k) for k in SandboxConfig.__dataclass_fields__}
        kw.update(image=snap, name=None, state_root=self._state_root)
        kw.update(overrides)
        out: list = []
        try:
            for _ in range(n):
                out.append(type(self)(kw))
        except BaseException:
            for sb in out:
                sb.delete()
            raise
        return out
