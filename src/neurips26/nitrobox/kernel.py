"""Kernel probes: can this kernel and these sysctls run sandboxes at all (checked once per mode)?"""

from __future__ import annotations

import os

from neurips26.nitrobox.errors import KernelSupportError

_kernel_ok: dict[bool, str | None] = {}


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def check_kernel(rootless: bool) -> None:
    """Raise ``KernelSupportError`` naming the sysctl/kernel version that forbids sandboxes."""
    if rootless in _kernel_ok:
        if _kernel_ok[rootless]:
            raise KernelSupportError(_kernel_ok[rootless])
        return
    msg = None
    n = _read_int("/proc/sys/user/max_user_namespaces")
    if n is not None and n <= 0:
        msg = "user namespaces are disabled: sysctl user.max_user_namespaces = 0"
    elif rootless and _read_int("/proc/sys/kernel/unprivileged_userns_clone") == 0:
        msg = "unprivileged user namespaces are disabled: sysctl kernel.unprivileged_userns_clone = 0"
    elif rootless and _read_int("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1:
        msg = ("unprivileged user namespaces are restricted by AppArmor: "
               "sysctl kernel.apparmor_restrict_unprivileged_userns = 1")
    else:
        rel = os.uname().release
        try:
            major, minor = (int(x) for x in rel.split(".")[:2])
        except ValueError:
            major, minor = 99, 0
        if (major, minor) < (5, 11):
            msg = f"overlayfs inside a user namespace needs Linux >= 5.11, this kernel is {rel}"
        else:
            try:
                fs = open("/proc/filesystems").read()
            except OSError:
                fs = "overlay"
            if "overlay" not in fs:
                msg = "the overlay filesystem is not available (modprobe overlay)"
    _kernel_ok[rootless] = msg
    if msg:
        raise KernelSupportError(msg)
