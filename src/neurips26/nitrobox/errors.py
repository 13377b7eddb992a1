"""Typed exceptions of the NitroBox API (spec: "Bad input (clear exceptions)")."""

from __future__ import annotations


class SandboxError(RuntimeError):
    """Base class of every NitroBox runtime error."""


class ImageError(SandboxError, ValueError):
    """The image directory is missing or unusable (no ``/bin/sh``)."""


class KernelSupportError(SandboxError):
    """The kernel (or a sysctl) forbids what a sandbox needs; the message names the sysctl/version."""


class LimitsUnavailableError(SandboxError):
    """A limit was requested with ``strict_limits=True`` and no backend can enforce it."""


class SandboxStartError(SandboxError):
    """The sandbox process tree failed to start; carries the child's ``F:`` message."""


class SandboxClosedError(SandboxError):
    """exec/files/snapshot on a deleted sandbox."""


class SnapshotNotFoundError(SandboxError, KeyError):
    """An unknown or released snapshot."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "snapshot not found"


class CheckpointUnavailable(SandboxError):
    """CRIU cannot be used here; the message carries the ``criu check`` reason."""
