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
    assert CONFIGS["quick"].seeds == (0, 1, 2)             # spec check 11: 3-seed statistics
    assert {"coda", "ease"} <= set(c.methods) and c.select_seed == 0
    assert c.select_epochs is None and dict(c.share_rho) == {"hnota": "nota"}   # the run's own schedule
    full = CONFIGS["full"]
    assert full.data.n_tasks == (4, 6, 12) and full.data.cross_domain and full.cil.sweep_n == (2, 3)
    assert {"inflora", "l2p", "coda", "ease", "joint"} <= set(full.cil.methods)


def test_rho_max_defaults_above_a_large_rho():
    import torch
    from neurips26.nota import AdaptedLinear
    lay = AdaptedLinear(torch.nn.Linear(8, 8), rule="global", rho=0.4, learn_gamma=True)
    assert lay.rho_max == 0.4 and AdaptedLinear(torch.nn.Linear(8, 8), rho=0.05).rho_max == 0.2


def test_global_rule_gradient_is_the_projected_closed_form():
    """d/dS of gamma S / r (r = sqrt(||S||^2 + eps^2)) is gamma/r (I - S S^T / r^2): the step only rotates S
    (radial part ~ eps^2) and shrinks as 1/||S||; Adam's per-parameter scaling undoes that shrink, so the
    current adapter's raw step is not tiny, but ||dW^(t)|| stays at gamma (the under-fit, if any, is rho)."""
    import torch
    from neurips26.nota.accumulation import global_normalize
    g = torch.Generator().manual_seed(0)
    s = torch.randn(16, 16, generator=g, dtype=torch.float64).requires_grad_(True)
    up = torch.randn(16, 16, generator=g, dtype=torch.float64)
    gamma, eps = 0.7, 1e-3
    (global_normalize(s, gamma, eps) * up).sum().backward()
    sd = s.detach()
    r = float(torch.sqrt(sd.pow(2).sum() + eps ** 2))
    want = gamma / r * (up - sd * (sd * up).sum() / r ** 2)
    assert torch.allclose(s.grad, want, atol=1e-12)
    radial = float((s.grad * sd).sum())
    assert abs(radial - gamma * float((sd * up).sum()) * eps ** 2 / r ** 3) < 1e-12
    assert abs(radial) < 1e-9 * float(s.grad.norm() * sd.norm())


def test_each_global_method_selects_its_own_rho_once_and_caches_it(tmp_path, monkeypatch):
    """Per-method selection on the validation split, shared by every seed (select_seed), cached by hash."""
    import dataclasses
    from neurips26.nota import experiment as ex
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path / "cache"))
    s = CONFIGS["smoke"]
    cfg = dataclasses.replace(s, cil=dataclasses.replace(s.cil, methods=("nota", "lora_gn", "mpo_plain"),
                                                         select_rho=(0.05, 0.4)))
    bb, _ = pretrain(cfg.pretrain)
    train = synth_glyphs(cfg.data.cil_classes, cfg.data.train_per_class, seed=10)
    st = TrainSettings(epochs=1, batch=16)
    calls = []
    real = ex.select_rho
    monkeypatch.setattr(ex, "select_rho", lambda *a, **k: calls.append(k["method"]) or real(*a, **k))
    out = ex.selected_rhos(cfg, bb, train, st, seed=0)
    assert set(out) == {"nota", "lora_gn"} and sorted(calls) == ["lora_gn", "nota"]   # not mpo_plain
    for v in out.values():
        assert v["rho"] in (0.05, 0.4) and v["seed"] == 0
        assert v["val_A_last"][str(v["rho"])] == max(v["val_A_last"].values())
    want = real(bb, ex.task_split(cfg.data.cil_classes, 2, 0), train, dataclasses.replace(st, epochs=1), 0,
                (0.05, 0.4), cfg.cil.val_frac, method="lora_gn", bond=2, rank=1, eps_rel=1e-3)
    assert (out["lora_gn"]["rho"], out["lora_gn"]["val_A_last"]) == want              # LoRA-GN's own runs
    assert ex.selected_rhos(cfg, bb, train, st, seed=2) == out and len(calls) == 2      # seed 2: cached
    per_seed = dataclasses.replace(cfg, cil=dataclasses.replace(cfg.cil, select_seed=None))
    assert ex.selected_rhos(per_seed, bb, train, st, seed=1)["nota"]["seed"] == 1 and len(calls) == 4
    with pytest.raises(ValueError, match="global-rule"):
        real(bb, [[4, 5]], train, st, 0, (0.1,), method="sd_lora")


def test_selection_trains_on_the_run_schedule_and_hnota_keeps_notas_budget(tmp_path, monkeypatch):
    """select_epochs=None: the validation runs use the evaluated run's epochs (the best rho depends on the
    schedule); H-NoTA takes NoTA's selected rho (share_rho) without a selection of its own."""
    import dataclasses
    from neurips26.nota import experiment as ex
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path / "cache"))
    seen = []

    def fake(backbone, tasks, train, settings, seed, grid, val_frac, method, **kw):
        seen.append((method, settings.epochs))
        return {"nota": 0.4, "lora_gn": 0.2}[method], {str(r): 0.5 for r in grid}

    monkeypatch.setattr(ex, "select_rho", fake)
    s = CONFIGS["smoke"]
    cfg = dataclasses.replace(s, cil=dataclasses.replace(s.cil, methods=("hnota", "lora_gn", "nota", "mpo_tw"),
                                                         select_rho=(0.2, 0.4)))
    train = synth_glyphs(cfg.data.cil_classes, cfg.data.train_per_class, seed=10)
    out = ex.selected_rhos(cfg, None, train, TrainSettings(epochs=3, batch=16), seed=0)
    assert sorted(seen) == [("lora_gn", 3), ("nota", 3)]                 # the run's 3 epochs; no hnota run
    assert out["hnota"]["rho"] == out["nota"]["rho"] == 0.4 and out["hnota"]["from"] == "nota"
    assert out["lora_gn"]["rho"] == 0.2 and list(out) == ["hnota", "lora_gn", "nota"]
    one = dataclasses.replace(cfg, cil=dataclasses.replace(cfg.cil, select_epochs=1))
    ex.selected_rhos(one, None, train, TrainSettings(epochs=3, batch=16), seed=0)
    assert sorted(seen[2:]) == [("lora_gn", 1), ("nota", 1)]               # an explicit schedule, own cache
    bad = dataclasses.replace(cfg, cil=dataclasses.replace(cfg.cil, share_rho=(("hnota", "sd_lora"),)))
    with pytest.raises(ValueError, match="share_rho"):
        ex.selected_rhos(bad, None, train, TrainSettings(epochs=3, batch=16), seed=0)
