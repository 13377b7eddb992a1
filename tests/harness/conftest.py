"""A tiny fake paper registered for the harness tests, so they need no real paper."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest

from neurips26.harness import registry
from neurips26.harness.paper import Claim, at_least, verdict
from neurips26.harness.run import BenchRow

SLUG = "toy_paper"


@dataclass
class ToyConfig:
    n: int = 100


def _run(cfg, ctx):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    rng = np.random.default_rng(ctx.seed)
    x = rng.normal(size=cfg.n)
    fig, ax = plt.subplots()
    ax.hist(x)
    ctx.save_plot(fig, "hist")
    return {"mean": float(x.mean()), "n": cfg.n, "arr": np.arange(3)}


class _ToyPaper(registry.Paper):
    @property
    def status(self) -> str:
        return registry.IMPLEMENTED


@pytest.fixture
def toy_paper(monkeypatch):
    """Register ``toy_paper`` with an experiment and a bench module; removed after the test."""
    exp = types.ModuleType(f"neurips26.{SLUG}.experiment")
    exp.CONFIGS = {"smoke": ToyConfig(10), "quick": ToyConfig(100), "full": ToyConfig(10_000)}
    exp.CLAIMS = [
        Claim("mean_small", "the sample mean is near 0", "|mean| < 0.5",
              lambda m: (verdict(abs(m["mean"]) < 0.5), f"mean = {m['mean']:.3f}")),
        Claim("n_large", "n is at least 1000", ">= 1000", at_least("n", 1000)),
        Claim("missing", "needs a metric the run does not make", "x", lambda m: ("holds", m["nope"])),
    ]
    exp.run = _run
    bench = types.ModuleType(f"neurips26.{SLUG}.bench")
    bench.bench = lambda ctx: [BenchRow("speed", 2.0, 4.0, "anchor", "s"),
                               BenchRow("rate", 10.0, None, "anchor", "1/s", "higher", "not installed")]
    pkg = types.ModuleType(f"neurips26.{SLUG}")
    for name, mod in ((pkg.__name__, pkg), (exp.__name__, exp), (bench.__name__, bench)):
        monkeypatch.setitem(sys.modules, name, mod)
    paper = _ToyPaper(SLUG, "A toy paper for harness tests")
    monkeypatch.setattr(registry, "PAPERS", registry.PAPERS + (paper,))
    monkeypatch.setitem(registry._BY_SLUG, SLUG, paper)
    return paper
