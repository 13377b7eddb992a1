"""Where papers cache what they fetch or build: ``$NEURIPS26_CACHE/<slug>``, default ``~/.cache/neurips26``.

One rule for every folder, so a user moves all caches with one variable (and CI can point it at scratch).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """``$NEURIPS26_CACHE`` when set and non-empty, else ``~/.cache/neurips26``."""
    root = os.environ.get("NEURIPS26_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "neurips26"


def cache_dir(slug: str) -> Path:
    """The cache folder of one paper (not created here)."""
    return cache_root() / slug
