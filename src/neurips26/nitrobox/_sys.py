"""Thin ctypes wrappers around the Linux calls Python 3.11 does not expose.

Everything here is hand-written on purpose (spec: "namespace/mount/pivot_root via ctypes, the
openat2 wrapper"); ``os.unshare``/``os.setns`` are Python >= 3.12 only. The module imports only
the standard library, so the zygote and the forked sandbox children can use it without touching
the filesystem after ``pivot_root``.
"""

from __future__ import annotations

import ctypes
import os
import platform


def _open_libc() -> ctypes.CDLL:
    """glibc by its soname; ``ctypes.util.find_library`` (it imports subprocess, shutil, tempfile and
    runs ldconfig: +1.2 MiB in the zygote and in every tree forked from it) only where that fails."""
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        from ctypes import util

        return ctypes.CDLL(util.find_library("c"), use_errno=True)


_libc = _open_libc()

# --- syscall numbers (x86_64; aarch64 in the second column) --------------------------------------
_MACHINE = platform.machine()
_NR = {
    "x86_64": {"pivot_root": 155, "seccomp": 317, "openat2": 437, "close_range": 436,
               "pidfd_open": 434, "pidfd_send_signal": 424, "capget": 125, "capset": 126,
               "process_mrelease": 448},
    "aarch64": {"pivot_root": 41, "seccomp": 277, "openat2": 437, "close_range": 436,
                "pidfd_open": 434, "pidfd_send_signal": 424, "capget": 90, "capset": 91,
                "process_mrelease": 448},
}.get(_MACHINE)

# --- clone/unshare flags ---------------------------------------------------------------------------
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080
CLONE_NEW_ALL = (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER
                 | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWTIME)

# --- mount flags -----------------------------------------------------------------------------------
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
MS_STRICTATIME = 1 << 24
MNT_DETACH = 2

# statvfs f_flag bits (NOT the same numbers as MS_*: ST_RELATIME = 4096 = MS_BIND)
ST_RDONLY, ST_NOSUID, ST_NODEV, ST_NOEXEC = 1, 2, 4, 8
ST_NOATIME, ST_NODIRATIME, ST_RELATIME = 1024, 2048, 4096

# --- prctl -----------------------------------------------------------------------------------------
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38

# --- openat2 ---------------------------------------------------------------------------------------
RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
RESOLVE_IN_ROOT = 0x10

# --- seccomp ---------------------------------------------------------------------------------------
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_SPEC_ALLOW = 4


def _check(ret: int, what: str, path: str | bytes | None = None) -> int:
    if ret == -1:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}", path)
    return ret


def _b(s: str | bytes | None) -> bytes | None:
    if s is None or isinstance(s, bytes):
        return s
    return s.encode()


_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def unshare(flags: int) -> None:
    """unshare(2)."""
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0,
          data: str | None = None) -> None:
    """mount(2); raises OSError naming the target."""
    _check(_libc.mount(_b(source), _b(target), _b(fstype), flags, _b(data)), f"mount {target}", target)


def umount2(target: str, flags: int = 0) -> None:
    _check(_libc.umount2(_b(target), flags), f"umount {target}", target)


def pivot_root(new_root: str, put_old: str) -> None:
    _check(_libc.syscall(_NR["pivot_root"], _b(new_root), _b(put_old)), "pivot_root")


def sethostname(name: str) -> None:
    raw = name.encode()
    _check(_libc.sethostname(raw, len(raw)), "sethostname")


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    return _check(_libc.prctl(option, arg2, arg3, 0, 0), f"prctl({option})")


def close_range(first: int, last: int = 0xFFFFFFFF) -> None:
    """close_range(2); falls back to os.closerange if the syscall is missing."""
    if first > last:
        return
    if _NR is None or _libc.syscall(_NR["close_range"], ctypes.c_uint(first), ctypes.c_uint(last),
                                    ctypes.c_uint(0)) == -1:
        os.closerange(first, min(last, 1 << 20) + 1)


def close_all_except(keep: "list[int] | tuple[int, ...]") -> None:
    """Close every fd except those in ``keep`` with a few close_range calls (no /proc walk)."""
    prev = -1
    for fd in sorted(set(keep)):
        close_range(prev + 1, fd - 1)
        prev = fd
    close_range(prev + 1)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def openat2(dirfd: int, path: str, flags: int, mode: int = 0, resolve: int = 0) -> int:
    """openat2(2) (syscall 437): open ``path`` relative to ``dirfd`` under ``resolve`` rules."""
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & (os.O_CREAT | getattr(os, "O_TMPFILE", 0)) else 0,
                   resolve)
    fd = _libc.syscall(_NR["openat2"], ctypes.c_int(dirfd), _b(path), ctypes.byref(how),
                       ctypes.c_size_t(ctypes.sizeof(how)))
    return _check(fd, f"openat2 {path}", path)


def pidfd_open(pid: int) -> int:
    return os.pidfd_open(pid)


def pidfd_send_signal(pidfd: int, sig: int) -> None:
    import signal as _signal

    _signal.pidfd_send_signal(pidfd, sig)


def process_mrelease(pidfd: int) -> bool:
    """Reap the address space of a process that is already dying (SIGKILLed) in the caller's context,
    on the caller's CPU, while the process runs the rest of its exit (process_mrelease(2), Linux
    5.15+). False where the call is missing or refused (the process then frees it in its own exit)."""
    nr = _NR.get("process_mrelease") if _NR else None
    if nr is None:
        return False
    return _libc.syscall(nr, ctypes.c_int(pidfd), ctypes.c_uint(0)) == 0


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


_CAP_V3 = 0x20080522


def capget() -> tuple[int, int, int]:
    """(effective, permitted, inheritable) capability masks of the calling thread (64-bit ints)."""
    hdr = _CapHeader(_CAP_V3, 0)
    data = (_CapData * 2)()
    _check(_libc.syscall(_NR["capget"], ctypes.byref(hdr), data), "capget")
    return tuple(data[0].__getattribute__(k) | (data[1].__getattribute__(k) << 32)
                 for k in ("effective", "permitted", "inheritable"))


def capset(effective: int, permitted: int, inheritable: int) -> None:
    """Set the calling thread's capability masks (lowering ``effective`` needs no privilege)."""
    hdr = _CapHeader(_CAP_V3, 0)
    data = (_CapData * 2)()
    for i in (0, 1):
        sh = 32 * i
        data[i].effective = (effective >> sh) & 0xFFFFFFFF
        data[i].permitted = (permitted >> sh) & 0xFFFFFFFF
        data[i].inheritable = (inheritable >> sh) & 0xFFFFFFFF
    _check(_libc.syscall(_NR["capset"], ctypes.byref(hdr), data), "capset")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class SeccompProgram:
    """A compiled classic-BPF program (bytes from libseccomp's ``export_bpf``), loadable after fork.

    The ctypes buffer and ``sock_fprog`` are built once in the parent, so loading in the child is a
    single syscall: ``seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_SPEC_ALLOW, &prog)``.
    """

    def __init__(self, bpf: bytes):
        if len(bpf) % 8 or not bpf:
            raise ValueError(f"seccomp program must be a non-empty multiple of 8 bytes, got {len(bpf)}")
        self.bpf = bpf
        self._buf = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _SockFprog(len(bpf) // 8, ctypes.cast(self._buf, ctypes.c_void_p))

    def load(self) -> None:
        ret = _libc.syscall(_NR["seccomp"], ctypes.c_uint(SECCOMP_SET_MODE_FILTER),
                            ctypes.c_uint(SECCOMP_FILTER_FLAG_SPEC_ALLOW), ctypes.byref(self._prog))
        _check(ret, "seccomp")


def cap_last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except OSError:
        return 40


def locked_mount_flags(path: str) -> int:
    """Translate ``statvfs(path).f_flag`` bit by bit into MS_* flags a remount must keep.

    Spec step 5: never OR ``f_flag`` in raw -- ``ST_RELATIME`` (4096) is numerically ``MS_BIND``.
    """
    f = os.statvfs(path).f_flag
    out = 0
    for st, ms in ((ST_NOSUID, MS_NOSUID), (ST_NODEV, MS_NODEV), (ST_NOEXEC, MS_NOEXEC),
                   (ST_NOATIME, MS_NOATIME), (ST_NODIRATIME, MS_NODIRATIME), (ST_RELATIME, MS_RELATIME)):
        if f & st:
            out |= ms
    return out
