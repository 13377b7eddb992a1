"""Acceptance check 7 (slow): the 3-seed statistics of the quick configuration."""

import numpy as np
import pytest

from neurips26.harness.run import run_paper
from neurips26.obsalign.obsbench import quick_blind


@pytest.mark.slow
def test_quick_three_seed_statistics(tmp_path):
    res = run_paper("obsalign", "quick", out=tmp_path / "q", progress=False)
    runs = [p["metrics"] for p in res["per_seed"]]
    blind = np.zeros((3, 12), bool)
    for m, cs in enumerate(quick_blind()):
        blind[m, list(cs)] = True
    nt = {k: np.mean([np.array(r["methods"][k]["nt_cells"])[blind].mean() for r in runs])
          for k in ("obsalign", "alwaysalign")}
    assert nt["obsalign"] < nt["alwaysalign"]
    gap = np.mean([r["methods"]["obsalign"]["unimodal_mean"] - r["methods"]["noalign"]["unimodal_mean"]
                   for r in runs])
    assert gap >= -0.005
    assert np.mean([r["omega_auroc"] for r in runs]) >= 0.65
