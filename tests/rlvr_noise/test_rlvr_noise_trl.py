"""Our GRPO-family losses vs TRL's own ``GRPOTrainer._compute_loss`` (loss_type grpo / dr_grpo / dapo, and
grpo with the KL term at beta = 0.04).

Skips with the reason when trl is not installed (``pip install trl==1.16.0``)."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl", reason="trl not installed (pip install trl==1.16.0)")

from neurips26.rlvr_noise.bench import trl_loss_check  # noqa: E402


def test_losses_equal_trl_compute_loss_on_identical_tensors():
    out = trl_loss_check(n_seq=16, seed=0)
    assert set(out) == {"grpo", "dr_grpo", "dapo", "grpo_kl"}
    for lt, v in out.items():
        assert v["abs_diff"] <= 1e-6, (lt, v)
    # the three aggregations really differ on this batch (so equality is not trivially shared)
    vals = [v["trl"] for v in out.values()]
    assert len({round(x, 6) for x in vals}) == 4
