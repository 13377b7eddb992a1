"""NitroBox: daemon-less, copy-on-write namespace sandboxes for agentic-RL rollouts.

``Sandbox(config)`` -> ``exec``/files/``reset``/``snapshot``/``branch``/``delete``; ``SandboxPool`` and
the asyncio API for rollout workers; adapters for Docker-SDK and Harbor/SkyRL-style code.
"""

from neurips26.nitrobox.config import SandboxConfig
from neurips26.nitrobox.errors import (CheckpointUnavailable, ImageError, KernelSupportError,
                                       LimitsUnavailableError, SandboxClosedError, SandboxError,
                                       SandboxStartError, SnapshotNotFoundError)
from neurips26.nitrobox.oci import import_image
from neurips26.nitrobox.sandbox import BackgroundJob, ExecResult, Sandbox, Snapshot

__all__ = ["Sandbox", "SandboxConfig", "ExecResult", "Snapshot", "BackgroundJob", "import_image", "SandboxError",
           "ImageError", "KernelSupportError", "LimitsUnavailableError", "SandboxStartError",
           "SandboxClosedError", "SnapshotNotFoundError", "CheckpointUnavailable"]
