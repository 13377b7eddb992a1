"""Process-wide state: the state root and the reference counts of frozen layers.

The spawner thread is ``spawner.py``, the background unlinker ``reaper.py``, the kernel probes
``kernel.py``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from neurips26.nitrobox.reaper import trash

STATE_ENV = "NEURIPS26_NBX_STATE"


def default_state_root() -> str:
    """``$NEURIPS26_NBX_STATE`` or ``/dev/shm/neurips26-nbx-<uid>`` (tmpfs: unlink is ~free), else $TMPDIR."""
    env = os.environ.get(STATE_ENV)
    if env:
        return env
    uid = os.geteuid()
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        return f"/dev/shm/neurips26-nbx-{uid}"
    return os.path.join(os.environ.get("TMPDIR", "/tmp"), f"neurips26-nbx-{uid}")


def ensure_state_root(root: str) -> Path:
    p = Path(root)
    for sub in ("sandboxes", "layers", "trash", "images"):
        (p / sub).mkdir(parents=True, exist_ok=True)
    try:
        os.chmod(p, 0o711)
    except OSError:
        pass
    return p


class LayerRefs:
    """Reference counts of frozen layer dirs; a layer is trashed when no sandbox/snapshot uses it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}
        self.roots: dict[str, Path] = {}

    def acquire(self, layers, root: Path) -> None:
        with self.lock:
            for lay in layers:
                self.counts[lay] = self.counts.get(lay, 0) + 1
                self.roots[lay] = root

    def release(self, layers) -> None:
        dead = []
        with self.lock:
            for lay in layers:
                c = self.counts.get(lay, 0) - 1
                if c <= 0:
                    self.counts.pop(lay, None)
                    dead.append((lay, self.roots.pop(lay, None)))
                else:
                    self.counts[lay] = c
        for lay, root in dead:
            if root is not None:
                trash(root, lay)

    def count(self, layer: str) -> int:
        with self.lock:
            return self.counts.get(layer, 0)


layer_refs = LayerRefs()
