"""The files API, client side: every path is opened by the sandbox's agent (``agent.file_op``).

``FilesClient`` is mixed into ``Sandbox``; it sends one request per operation with a fresh reply
socket and gets the opened fd back over ``SCM_RIGHTS``.
"""

from __future__ import annotations

import errno
import os
import secrets
import socket
import stat
from pathlib import Path
from typing import Any

from neurips26.harness.validation import check_scalar
from neurips26.nitrobox import _sys
from neurips26.nitrobox.agent import _kind
from neurips26.nitrobox.config import check_path_text
from neurips26.nitrobox.errors import SandboxError
from neurips26.nitrobox.execution import _AgentGone


class FileInfo(tuple):
    """``Sandbox.stat`` result: mode, size, mtime_ns, uid, gid (inside the sandbox), symlink target,
    inode and link count (hard links: ``get_archive`` writes the second name as a link)."""

    __slots__ = ()
    _fields = ("mode", "size", "mtime_ns", "uid", "gid", "target", "ino", "nlink")

    def __new__(cls, mode: int, size: int, mtime_ns: int, uid: int, gid: int, target: str = "",
                ino: int = 0, nlink: int = 1):
        return super().__new__(cls, (mode, size, mtime_ns, uid, gid, target, ino, nlink))

    mode = property(lambda self: self[0])
    size = property(lambda self: self[1])
    mtime_ns = property(lambda self: self[2])
    uid = property(lambda self: self[3])
    gid = property(lambda self: self[4])
    target = property(lambda self: self[5])
    ino = property(lambda self: self[6])
    nlink = property(lambda self: self[7])

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    @property
    def is_file(self) -> bool:
        return stat.S_ISREG(self.mode)

    @property
    def is_symlink(self) -> bool:
        return stat.S_ISLNK(self.mode)


_MAX_DEPTH = 256


def _check_mode(mode: Any) -> int:
    return check_scalar(mode, "mode", int, min=0, max=0o7777)


def _kind_name(mode: int) -> str:
    return _kind(mode)


# The fast path of read_file/write_file: resolved from an fd of the sandbox's root (handed over once
# per tree by the agent), inside that root, never through a magic link and never across a mount (so
# never into the sandbox's /proc, /sys, /dev, the host /usr or a bind mount: those take the agent
# path, with a command's capabilities). On the overlay itself sandbox root (DAC_OVERRIDE, FOWNER over
# mapped ids) may do what the client does, so the client acts here only on inodes whose owner and
# group are mapped into the sandbox, only on regular files, and creates files only in a mapped
# directory that already exists; anything else (a special file, an unmapped owner, a missing parent,
# EACCES for a rootless client) is handed to the agent unchanged.
_FAST_RESOLVE = _sys.RESOLVE_IN_ROOT | _sys.RESOLVE_NO_MAGICLINKS | _sys.RESOLVE_NO_XDEV
_FAST_CREATE = _sys.RESOLVE_BENEATH | _sys.RESOLVE_NO_SYMLINKS | _sys.RESOLVE_NO_MAGICLINKS | _sys.RESOLVE_NO_XDEV


class _Fallback(Exception):
    """The fast path declines: the agent does the operation."""



class FilesClient:
    # ------------------------------------------------------------------ files API (openat2)
    # The files API: every path is resolved and opened by the sandbox's agent, inside the sandbox's
    # root and mounts, with a command's capabilities (never host root's), never through /proc magic
    # links; the opened fd comes back over SCM_RIGHTS and the client only reads or writes it.
    # Non-regular files are refused unless ``special=True``; reads are capped (``max_file_bytes``);
    # trees keep symlinks as symlinks (never followed, so no loops), modes and mtimes.
    def _abs(self, path: str, name: str = "path") -> str:
        check_path_text(path, name)
        if not path:
            raise ValueError(f"{name} must be a non-empty str")
        if not path.startswith("/"):
            path = os.path.join(self.config.working_dir, path)
        return path

    # ------------------------------------------------------------------ fast path (see _FAST_RESOLVE)
    def _fast_ok(self) -> bool:
        return not self.config.criu and not (self.rootless and self.config.subuid)

    def _mapped(self, st: os.stat_result) -> bool:
        """The inode's owner and group are ids of the sandbox's user namespace."""
        if self.rootless:
            return st.st_uid == os.geteuid() and st.st_gid == os.getegid()
        return st.st_uid < 65536 and st.st_gid < 65536

    def _root_fd(self) -> int:
        """An fd of the live tree's ``/`` (the agent opens it; closed with the tree). Call under _life."""
        proc = self._proc
        if proc.rootfd is None:
            _, fds = self._fop({"op": "open", "how": "dir", "path": "/"})
            for extra in fds[1:]:
                os.close(extra)
            os.set_inheritable(fds[0], False)
            proc.rootfd = fds[0]
        return proc.rootfd

    def _fast_open(self, p: str, write: bool, perm: int = 0o644, nofollow: bool = False) -> int:
        """An fd for ``p`` opened by the client from the root fd, or ``_Fallback``."""
        rel = p.lstrip("/") or "."
        with self._life:
            self._check_open()
            if self._shell_dead:
                raise _Fallback
            root = self._root_fd()
            try:
                pfd = _sys.openat2(root, rel, os.O_PATH | os.O_CLOEXEC | (os.O_NOFOLLOW if nofollow else 0), 0,
                                   _FAST_RESOLVE)
            except FileNotFoundError:
                if not write:
                    raise _Fallback from None  # the agent raises the FileNotFoundError (same text)
                return self._fast_create(root, rel, perm)
            except OSError:
                raise _Fallback from None  # EXDEV (a mount), ELOOP, EACCES, ...
            try:
                st = os.fstat(pfd)
                if not stat.S_ISREG(st.st_mode) or not self._mapped(st):
                    raise _Fallback
                flags = (os.O_WRONLY if write else os.O_RDONLY) | os.O_CLOEXEC | os.O_NOCTTY
                try:
                    fd = os.open(f"/proc/self/fd/{pfd}", flags)  # the inode checked, no second walk
                except OSError:
                    raise _Fallback from None
            finally:
                os.close(pfd)
            if write:
                os.ftruncate(fd, 0)
            return fd

    def _fast_create(self, root: int, rel: str, perm: int) -> int:
        parent, _, name = rel.rpartition("/")
        try:
            dfd = _sys.openat2(root, parent or ".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, 0, _FAST_RESOLVE)
        except OSError:
            raise _Fallback from None  # missing parents: the agent makes them
        try:
            if not self._mapped(os.fstat(dfd)):
                raise _Fallback
            try:
                fd = _sys.openat2(dfd, name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NOCTTY
                                  | os.O_CLOEXEC, perm, _FAST_CREATE)
            except OSError:
                raise _Fallback from None  # e.g. a dangling symlink there: the agent's rules apply
        finally:
            os.close(dfd)
        os.fchmod(fd, perm)  # exact mode, whatever the umask
        return fd

    def _fop(self, op: dict, timeout: float = 60.0) -> tuple[list[str], list[int]]:
        """One file operation in the agent: (reply fields after ``OK``, fds) or the errno as OSError."""
        with self._life:
            self._check_open()
            if self._shell_dead:
                self._respawn_keep()
            nonce = secrets.token_hex(8)
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                try:
                    self._send(dict(op, n=nonce), [theirs.fileno()])
                except _AgentGone:
                    self._shell_dead = True
                    raise SandboxError(f"sandbox {self.id}: agent is gone (retry)") from None
                finally:
                    theirs.close()
                ours.settimeout(timeout)
                try:
                    msg, fds, _, _ = socket.recv_fds(ours, 1 << 16, 4)
                except socket.timeout:
                    raise SandboxError(f"sandbox {self.id}: file operation {op['op']} timed out") from None
            finally:
                ours.close()
        text = msg.decode(errors="replace")
        got, _, rest = text.partition(" ")
        if got != nonce:
            for fd in fds:
                os.close(fd)
            self._shell_dead = not text
            raise SandboxError(f"sandbox {self.id}: no answer from the agent for {op['op']}")
        if rest.startswith("E "):
            _, num, msg_ = rest.split(" ", 2)
            raise OSError(int(num), msg_, op.get("path"))
        return rest.split(" ")[1:], fds

    def stat(self, path: str, follow_symlinks: bool = True) -> FileInfo:
        """Type, mode, size, mtime and owner of ``path`` in the sandbox (``target`` for a symlink)."""
        p = self._abs(path)
        f, _ = self._fop({"op": "lstat", "path": p, "follow": bool(follow_symlinks)})
        return FileInfo(int(f[0]), int(f[1]), int(f[2]), int(f[3]), int(f[4]), " ".join(f[7:]), int(f[5]), int(f[6]))

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644, mkdirs: bool = True,
                   mtime_ns: int | None = None, special: bool = False) -> None:
        """Write ``data`` at ``path`` (created with ``mode``; parents created when ``mkdirs``)."""
        if isinstance(data, str):
            data = data.encode()
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes or str, got {type(data).__name__}")
        mode = _check_mode(mode)
        p = self._abs(path)
        fd = None
        if not special and self._fast_ok():
            try:
                fd = self._fast_open(p, True, mode)
            except _Fallback:
                fd = None
        if fd is None:
            _, fds = self._fop({"op": "open", "how": "w", "path": p, "perm": mode, "parents": bool(mkdirs),
                                "special": bool(special)})
            fd = fds[0]
        try:
            os.set_blocking(fd, True)
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if mtime_ns is not None:
                os.utime(fd, ns=(int(mtime_ns), int(mtime_ns)))
        finally:
            os.close(fd)

    def read_file(self, path: str, max_bytes: int | None = None, special: bool = False,
                  follow_symlinks: bool = True) -> bytes:
        """Bytes of the regular file ``path`` (``FileNotFoundError`` if missing).

        More than ``max_bytes`` (default ``config.max_file_bytes``) raises ``OSError(EFBIG)``;
        a FIFO, device or socket raises ``OSError(EINVAL)`` unless ``special=True``.
        """
        cap = self.config.max_file_bytes if max_bytes is None else max_bytes
        cap = check_scalar(cap, "max_bytes", int, min=0)
        p = self._abs(path)
        fd = None
        if not special and self._fast_ok():
            try:
                fd = self._fast_open(p, False, nofollow=not follow_symlinks)
            except _Fallback:
                fd = None
        if fd is None:
            _, fds = self._fop({"op": "open", "how": "r", "path": p, "special": bool(special),
                                "nofollow": not follow_symlinks})
            fd = fds[0]
        try:
            if special:
                os.set_blocking(fd, True)
            chunks, total = [], 0
            while total <= cap:
                try:
                    b = os.read(fd, min(1 << 20, cap + 1 - total))
                except BlockingIOError:
                    break
                if not b:
                    break
                chunks.append(b)
                total += len(b)
            if total > cap:
                raise OSError(errno.EFBIG, f"{p} in sandbox {self.id} is larger than max_bytes={cap}", path)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def read_text(self, path: str, **kw: Any) -> str:
        return self.read_file(path, **kw).decode(errors="replace")

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    def list_dir(self, path: str = ".") -> list[str]:
        _, fds = self._fop({"op": "open", "how": "dir", "path": self._abs(path)})
        try:
            return sorted(os.listdir(fds[0]))
        finally:
            os.close(fds[0])

    def mkdir(self, path: str, mode: int = 0o755, parents: bool = True) -> None:
        self._fop({"op": "mkdir", "path": self._abs(path), "perm": _check_mode(mode), "parents": bool(parents),
                   "exist_ok": True, "chmod": not parents})

    def symlink(self, target: str, path: str, replace: bool = False) -> None:
        """Create the symlink ``path -> target`` in the sandbox (``target`` is not checked)."""
        check_path_text(target, "target")
        self._fop({"op": "symlink", "path": self._abs(path), "target": target, "replace": bool(replace)})

    def link(self, target: str, path: str, replace: bool = False) -> None:
        """Create the hard link ``path`` to the existing ``target`` in the sandbox."""
        self._fop({"op": "link", "path": self._abs(path), "target": self._abs(target, "target"),
                   "replace": bool(replace)})

    def set_mtime(self, path: str, mtime_ns: int, follow_symlinks: bool = True) -> None:
        self._fop({"op": "utime", "path": self._abs(path), "ns": int(mtime_ns), "nofollow": not follow_symlinks})

    def upload(self, local: str | os.PathLike, remote: str) -> list[str]:
        """Copy a host file or tree into the sandbox at ``remote``: modes and mtimes kept, symlinks
        inside the tree copied as symlinks. Returns the host paths skipped (FIFOs, devices, sockets)."""
        local = Path(local)
        st = os.stat(local)  # the top level may be a symlink to what the user means
        skipped: list[str] = []
        remote = self._abs(remote, "remote")
        if stat.S_ISDIR(st.st_mode):
            self._upload_dir(str(local), remote, st, skipped, 0)
        elif stat.S_ISREG(st.st_mode):
            self._upload_file(str(local), remote, st)
        else:
            raise OSError(errno.EINVAL, f"{local} is a {_kind_name(st.st_mode)}, not a file or directory", str(local))
        return skipped

    def _upload_file(self, src: str, dst: str, st: os.stat_result) -> None:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
            data = f.read()
        self.write_file(dst, data, stat.S_IMODE(st.st_mode), mkdirs=True, mtime_ns=st.st_mtime_ns)

    def _upload_dir(self, src: str, dst: str, st: os.stat_result, skipped: list, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise OSError(errno.ELOOP, f"directory tree deeper than {_MAX_DEPTH} levels", src)
        self._fop({"op": "mkdir", "path": dst, "perm": stat.S_IMODE(st.st_mode) | 0o700, "exist_ok": True,
                   "parents": depth == 0})
        with os.scandir(src) as it:
            entries = sorted(it, key=lambda e: e.name)
        for e in entries:
            est = e.stat(follow_symlinks=False)
            s, d = os.path.join(src, e.name), dst.rstrip("/") + "/" + e.name
            if stat.S_ISLNK(est.st_mode):
                self.symlink(os.readlink(s), d, replace=True)
            elif stat.S_ISDIR(est.st_mode):
                self._upload_dir(s, d, est, skipped, depth + 1)
            elif stat.S_ISREG(est.st_mode):
                self._upload_file(s, d, est)
            else:
                skipped.append(s)
        self._fop({"op": "mkdir", "path": dst, "perm": stat.S_IMODE(st.st_mode), "exist_ok": True})
        self.set_mtime(dst, st.st_mtime_ns)

    def download(self, remote: str, local: str | os.PathLike) -> list[str]:
        """Copy a sandbox file or tree to ``local``: modes and mtimes kept, symlinks kept as symlinks
        (never followed, so a ``loop -> ..`` is one link). Returns the sandbox paths skipped
        (FIFOs, devices, sockets); each file is capped at ``max_file_bytes``."""
        local = Path(local)
        rp = self._abs(remote, "remote")
        info = self.stat(rp)
        skipped: list[str] = []
        if stat.S_ISDIR(info.mode):
            local.mkdir(parents=True, exist_ok=True)
            self._download_dir(rp, str(local), info, skipped, 0)
        elif stat.S_ISREG(info.mode):
            local.parent.mkdir(parents=True, exist_ok=True)
            self._download_file(rp, str(local), info, follow=True)
        else:
            raise OSError(errno.EINVAL, f"{rp} is a {_kind_name(info.mode)}, not a file or directory", remote)
        return skipped

    def _download_file(self, src: str, dst: str, info: "FileInfo | os.stat_result", follow: bool) -> None:
        data = self.read_file(src, follow_symlinks=follow)
        mode = stat.S_IMODE(info.st_mode if hasattr(info, "st_mode") else info.mode)
        mtime = info.st_mtime_ns if hasattr(info, "st_mtime_ns") else info.mtime_ns
        try:
            os.unlink(dst)
        except FileNotFoundError:
            pass
        fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            os.utime(fd, ns=(mtime, mtime))
        finally:
            os.close(fd)

    def _download_dir(self, src: str, dst: str, info, skipped: list, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise OSError(errno.ELOOP, f"directory tree deeper than {_MAX_DEPTH} levels", src)
        _, fds = self._fop({"op": "open", "how": "dir", "path": src, "nofollow": depth > 0})
        dfd = fds[0]
        try:
            with os.scandir(dfd) as it:  # names and lstat only: nothing is opened through this fd
                entries = sorted(((e.name, e.stat(follow_symlinks=False)) for e in it), key=lambda x: x[0])
            links = {n: os.readlink(n, dir_fd=dfd) for n, st in entries if stat.S_ISLNK(st.st_mode)}
        finally:
            os.close(dfd)
        for name, st in entries:
            s, d = src.rstrip("/") + "/" + name, os.path.join(dst, name)
            if stat.S_ISLNK(st.st_mode):
                if os.path.lexists(d):
                    os.unlink(d)
                os.symlink(links[name], d)
            elif stat.S_ISDIR(st.st_mode):
                os.makedirs(d, exist_ok=True)
                self._download_dir(s, d, st, skipped, depth + 1)
            elif stat.S_ISREG(st.st_mode):
                self._download_file(s, d, st, follow=False)
            else:
                skipped.append(s)
        mode = stat.S_IMODE(info.st_mode if hasattr(info, "st_mode") else info.mode)
        mtime = info.st_mtime_ns if hasattr(info, "st_mtime_ns") else info.mtime_ns
        os.chmod(dst, mode | 0o700 if os.geteuid() != 0 else mode)
        os.utime(dst, ns=(mtime, mtime))
