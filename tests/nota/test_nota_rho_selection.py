"""rho of the global rule is selected on a validation split of the training images, never on test."""
import numpy as np
import pytest

from neurips26.nota.backbone import PretrainConfig, pretrain
from neurips26.nota.cil import TrainSettings
from neurips26.nota.data import synth_glyphs
from neurips26.nota.experiment import CONFIGS, GLOBAL_METHODS, RHO_GRID, select_rho, val_split


def test_val_split_stratified_and_disjoint():
    y = np.repeat([3, 5, 7], 10)
    fit, val = val_split(y, 0.2, seed=0)
    assert not set(fit) & set(val) and len(fit) + len(val) == len(y)
    assert [int((y[val] == c).sum()) for c in (3, 5, 7)] == [2, 2, 2]
    assert np.array_equal(val_split(y, 0.2, 0)[1], val)          # seeded
    with pytest.raises(ValueError, match="val_frac"):
        val_split(y, 1.5, 0)
    with pytest.raises(ValueError, match="no training image"):
        val_split(np.array([0, 1]), 0.5, 0)


def test_select_rho_uses_only_training_data_and_picks_the_best():
    bb, _ = pretrain(PretrainConfig(dim=16, depth=1, heads=2, classes=tuple(range(4)), per_class=12,
                                    epochs=1))
    train = synth_glyphs(range(4, 8), 10, seed=10)
    tasks = [[4, 5], [6, 7]]
    s = TrainSettings(epochs=1, batch=16)
    rho, scores = select_rho(bb, tasks, train, s, seed=0, grid=(0.05, 0.4), bond=2)
    assert set(scores) == {"0.05", "0.4"} and all(0.0 <= v <= 1.0 for v in scores.values())
    assert scores[str(rho)] == max(scores.values())
    assert rho == min(r for r in (0.05, 0.4) if scores[str(r)] == max(scores.values()))   # ties: smaller
    again = select_rho(bb, tasks, train, s, seed=0, grid=(0.05, 0.4), bond=2)
    assert again == (rho, scores)                                                          # deterministic
    with pytest.raises(ValueError, match="rho"):
        select_rho(bb, tasks, train, s, seed=0, grid=(0.0,))


def test_quick_selects_rho_for_the_global_methods_only():
    c = CONFIGS["quick"].cil
    assert c.select_rho == RHO_GRID and c.rho in RHO_GRID and 0 < c.val_frac < 1
    assert set(GLOBAL_METHODS) == {"nota", "lora_gn", "hnota"}
    assert CONFIGS["smoke"].cil.select_rho == ()          # smoke stays seconds


def test_rho_max_defaults_above_a_large_rho():
    import torch
    from neurips26.nota import AdaptedLinear
    lay = AdaptedLinear(torch.nn.Linear(8, 8), rule="global", rho=0.4, learn_gamma=True)
    assert lay.rho_max == 0.4 and AdaptedLinear(torch.nn.Linear(8, 8), rho=0.05).rho_max == 0.2
