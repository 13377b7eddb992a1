"""The sandbox's seccomp filter, compiled once per process with libseccomp (``pyseccomp``).

Spec step 9: default allow plus an explicit EPERM deny list; ``clone`` with any ``CLONE_NEW*`` bit
denied by an argument mask; ``clone3`` answered with **ENOSYS** (its flags sit behind a pointer, and
glibc >= 2.34 falls back to ``clone`` only on ENOSYS, so EPERM would break ``pthread_create``).
``ptrace`` is spelled out because Docker's default profile allows it on kernels >= 4.8.
"""

from __future__ import annotations

import errno
import os
import threading

from neurips26.nitrobox import _sys

DENY_EPERM = (
    "mount", "umount2", "pivot_root", "unshare", "setns",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open",
    "keyctl", "add_key", "request_key", "userfaultfd",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "open_by_handle_at",
    "io_uring_setup", "io_uring_enter", "io_uring_register",  # as Docker's default profile (>= 25.0)
)
_CLONE_NEW_BITS = (_sys.CLONE_NEWNS, _sys.CLONE_NEWCGROUP, _sys.CLONE_NEWUTS, _sys.CLONE_NEWIPC,
                   _sys.CLONE_NEWUSER, _sys.CLONE_NEWPID, _sys.CLONE_NEWNET, _sys.CLONE_NEWTIME)

_lock = threading.Lock()
_cached: "_sys.SeccompProgram | None" = None


def compile_bpf() -> bytes:
    """Build the filter with libseccomp and return its classic-BPF bytes (``export_bpf``)."""
    import pyseccomp as sc

    f = sc.SyscallFilter(sc.ALLOW)
    for name in DENY_EPERM:
        try:
            f.add_rule(sc.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):  # syscall unknown on this arch/libseccomp
            continue
    for bit in _CLONE_NEW_BITS:
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, bit, bit))
    try:
        f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    except (RuntimeError, ValueError, OSError):
        pass
    r, w = os.pipe()
    try:
        with os.fdopen(w, "wb", closefd=True) as fw:
            f.export_bpf(fw)
        chunks = []
        while True:
            b = os.read(r, 65536)
            if not b:
                break
            chunks.append(b)
    finally:
        os.close(r)
    return b"".join(chunks)


def program() -> "_sys.SeccompProgram":
    """The process-wide precompiled program (compiled on first use)."""
    global _cached
    with _lock:
        if _cached is None:
            _cached = _sys.SeccompProgram(compile_bpf())
        return _cached
