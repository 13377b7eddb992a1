"""The one table of papers: slug, title, status, module, pip extra and optional CLI command.

A paper's module is imported only when that paper is used (``load``), so ``neurips26 list`` is
instant and a missing optional dependency of one paper never breaks another.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

IMPLEMENTED = "implemented"
PLANNED = "planned"


@dataclass(frozen=True)
class Paper:
    """One row of the registry.

    slug:    folder name under ``neurips26/`` and the CLI's name for the paper.
    title:   the paper in a few words.
    extra:   the pip extra that brings its optional dependencies (``pip install 'neurips26[extra]'``).
    command: optional CLI sub-command the paper adds (``neurips26 <command> ...``), served by
             ``neurips26.<slug>.cli:main(argv)``.
    """

    slug: str
    title: str
    extra: str | None = None
    command: str | None = None

    @property
    def module(self) -> str:
        return f"neurips26.{self.slug}"

    @property
    def status(self) -> str:
        """Derived, never written by hand: a paper is implemented once its experiment.py exists."""
        return IMPLEMENTED if (_PACKAGE_DIR / self.slug / "experiment.py").is_file() else PLANNED

    @property
    def implemented(self) -> bool:
        return self.status == IMPLEMENTED


_PACKAGE_DIR = Path(__file__).resolve().parent.parent


PAPERS: tuple[Paper, ...] = (
    Paper("cofrgenet", "Gated CoFrGeNet: gated continued-fraction FFNs, divisions via log/exp", "cofrgenet"),
    Paper("bip", "BIP: virtual face identities in the gaps of the real-face embedding manifold", "bip"),
    Paper("nas", "Navigate-and-Stop best-policy identification, non-asymptotic", "nas"),
    Paper("deconv", "convMMD density deconvolution and empirical-Bayes denoising", "deconv"),
    Paper("gnn_margin", "Margin-based noisy expressivity of GNNs", "gnn_margin"),
    Paper("rlvr_noise", "Noisy data is destructive to RLVR", "rlvr_noise"),
    Paper("smfsr", "SMFSR: noise-started one-step real-world super-resolution", "smfsr"),
    Paper("bridge", "2D-to-3D Schroedinger-bridge lift: KL = O(N sigma^2)"),
    Paper("notvla", "NoTVLA: semantics-preserving VLA adaptation via narrative actions", "notvla"),
    Paper("nota", "NoTA: normalized tensor adaptation for class-incremental learning", "nota"),
    Paper("delayed_hits", "Delayed-hit caching with regret guarantees (UCB-DH, LA-FTPL)", "delayed_hits"),
    Paper("gfm_audit", "GFM audit: geospatial foundation model results and one shared harness",
          "gfm_audit", "gfm-audit"),
    Paper("entropy_filter", "No model required: H_K entropy-rate filtering against collapse",
          "entropy_filter", "entropy-filter"),
    Paper("obsalign", "ObsAlign: observability-aware cross-modal alignment", "obsalign"),
    Paper("ftrl_surplus", "Strategic surplus against constant-step FTRL", "ftrl_surplus"),
    Paper("nexus", "Nexus: optimizer wrapper steering pretraining to common minima", "nexus"),
    Paper("nextlat", "NextLat: next-latent prediction and self-speculative decoding", "nextlat"),
    Paper("njord", "Njord: probabilistic latent GNN for ensemble ocean forecasting", "njord"),
    Paper("nitrobox", "NitroBox: daemon-less copy-on-write sandboxes for agentic RL", "nitrobox", "nitrobox"),
)

_BY_SLUG = {p.slug: p for p in PAPERS}


class UnknownPaperError(KeyError):
    """Raised for a slug that is not in the registry."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


class PaperNotImplementedError(RuntimeError):
    """Raised when a planned (not yet implemented) paper is run."""


class MissingExtraError(ImportError):
    """Raised when a paper's optional dependency is not installed; names the pip extra."""


def slugs() -> list[str]:
    return [p.slug for p in PAPERS]


def get(slug: str) -> Paper:
    """The registry row of ``slug``; ``UnknownPaperError`` names the known slugs otherwise."""
    if not isinstance(slug, str):
        raise TypeError(f"slug must be a str, got {type(slug).__name__}")
    try:
        return _BY_SLUG[slug]
    except KeyError:
        raise UnknownPaperError(
            f"unknown paper {slug!r}; known slugs: {', '.join(sorted(_BY_SLUG))}") from None


def by_command(command: str) -> Paper | None:
    for p in PAPERS:
        if p.command == command:
            return p
    return None


def load(slug: str, submodule: str = "experiment") -> ModuleType:
    """Import ``neurips26.<slug>.<submodule>`` on demand.

    A missing third-party dependency becomes ``MissingExtraError`` naming the extra to install.
    """
    paper = get(slug)
    if not paper.implemented:
        raise PaperNotImplementedError(f"paper {slug!r} is planned, not implemented yet")
    name = f"{paper.module}.{submodule}" if submodule else paper.module
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        missing = e.name or "?"
        if missing.startswith("neurips26"):
            raise
        extra = paper.extra or "all"
        raise MissingExtraError(
            f"paper {slug!r} needs the Python package {missing!r}: "
            f"pip install 'neurips26[{extra}]'") from e
