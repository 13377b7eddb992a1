"""Acceptance checks 4, 8, 9, 10, the CIL metrics and the bad inputs of the loop."""
import numpy as np
import pytest
import torch

from neurips26.nota.accumulation import global_normalize
from neurips26.nota.adapters import AdaptedLinear, attach_adapters
from neurips26.nota.backbone import HybridViT
from neurips26.nota.cil import (CILModel, TrainSettings, check_tasks, cil_metrics, load_adapters, predict,
                                run_cil, save_adapters, train_task)
from neurips26.nota.data import check_images, synth_glyphs


@pytest.fixture(scope="module")
def backbone():
    torch.manual_seed(0)
    return HybridViT(dim=64, depth=1, heads=4, n_stem=3, n_classes=4).eval()


def fake_task(classes, n=16, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n * len(classes), 32, 32), dtype=np.float32), np.repeat(classes, n)


QUICK = TrainSettings(epochs=1, batch=16, lr_adapter=1e-2)


@pytest.mark.parametrize("method", ["lora_plain", "lora_gn", "nota", "hnota", "mpo_plain"])
def test_zero_init_output_unchanged_at_task_start(backbone, method):
    model = CILModel(backbone, method)
    g = torch.Generator().manual_seed(0)
    x = torch.from_numpy(fake_task([0])[0][:8])
    for t in range(3):
        prev = model.features(x).detach() if t else None
        model.new_task([2 * t, 2 * t + 1], g)
        if prev is not None:
            assert (model.features(x) - prev).abs().max() < 1e-6
        train_task(model, *fake_task([2 * t, 2 * t + 1], seed=t), QUICK, g)


def test_taskwise_start_equals_rescaled_previous(backbone):
    model = CILModel(backbone, "sd_lora")
    g = torch.Generator().manual_seed(0)
    for t in range(2):
        model.new_task([2 * t, 2 * t + 1], g)
        train_task(model, *fake_task([2 * t, 2 * t + 1], seed=t), QUICK, g)
    lay = model.layers[0]
    with torch.no_grad():
        d = lay.task_deltas()
        a = [float(x) for x in lay.alphas]
        before = a[0] * d[0] / d[0].norm() + a[1] * d[1]
        assert torch.allclose(lay.delta(), before, atol=1e-6)
        model.new_task([4, 5], g)
        expected = a[0] * d[0] / d[0].norm() + a[1] * d[1] / d[1].norm()   # only dW_{t-1} rescaled
        assert torch.allclose(lay.delta(), expected, atol=1e-6)


@pytest.mark.parametrize("method", ["nota", "sd_lora", "hnota", "seq_lora"])
def test_old_adapters_and_rows_bitwise_unchanged(backbone, method):
    model = CILModel(backbone, method)
    g = torch.Generator().manual_seed(0)
    model.new_task([0, 1], g)
    train_task(model, *fake_task([0, 1]), QUICK, g)
    snap_rows = model.rows[0].detach().clone()
    if method == "seq_lora":      # one shared adapter keeps training: only rows are frozen
        old = []
    else:
        old = [p.detach().clone() for lay in model.layers for p in lay.adapters[0].parameters()]
    frozen = lambda: {k: v for k, v in model.backbone.state_dict().items()  # noqa: E731
                      if not any(s in k for s in (".adapters.", ".alphas.", ".mods."))}
    base = {k: v.clone() for k, v in frozen().items()}
    model.new_task([2, 3], g)
    train_task(model, *fake_task([2, 3], seed=1), QUICK, g)
    assert torch.equal(model.rows[0], snap_rows)
    now = [p for lay in model.layers for p in lay.adapters[0].parameters()] if old else []
    assert all(torch.equal(a, b) for a, b in zip(old, now))
    assert base.keys() == frozen().keys() and all(torch.equal(base[k], v) for k, v in frozen().items())


def test_hnota_identity_equals_nota_and_gradcheck(backbone):
    torch.manual_seed(1)
    base = torch.nn.Linear(64, 64)
    nota = AdaptedLinear(base, rule="global")
    hier = AdaptedLinear(base, rule="hier")
    for _ in range(3):
        nota.new_task()
        hier.new_task()
        with torch.no_grad():
            for an, ah in zip(nota.adapters[-1].cores, hier.adapters[-1].cores):
                an.normal_()
                ah.copy_(an)
    assert len(hier.mods) == 2 and all(torch.equal(m, torch.eye(4)) for m in hier.modulations(0))
    x = torch.randn(10, 64)
    assert (nota(x) - hier(x)).abs().max() < 1e-6
    from neurips26.nota.mpo import contract
    small = AdaptedLinear(torch.nn.Linear(8, 8), rule="hier", bond=2, out_factors=(2, 2, 2),
                          in_factors=(2, 2, 2))
    small.new_task()
    cores = [torch.randn_like(c, dtype=torch.float64).requires_grad_() for c in small.adapters[0].cores]
    eye = torch.eye(2, dtype=torch.float64)
    mods = [(eye + 0.1 * torch.randn(2, 2, dtype=torch.float64)).requires_grad_() for _ in range(2)]
    fn = lambda *a: global_normalize(contract(a[:3], a[3:]), 0.7, 1e-3)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (*cores, *mods))


def test_hnota_bad_modulation_access():
    lay = AdaptedLinear(torch.nn.Linear(64, 64), rule="hier")
    lay.new_task()
    with pytest.raises(ValueError, match="historical adapter"):
        lay.modulations(0)
    with pytest.raises(ValueError, match="hier"):
        AdaptedLinear(torch.nn.Linear(64, 64), rule="global").modulations(0)
    with pytest.raises(ValueError, match="kind='mpo'"):
        AdaptedLinear(torch.nn.Linear(64, 64), kind="lora", rule="hier")


def test_parameter_efficiency(backbone):
    counts = {}
    for m in ("nota", "lora_gn", "hnota"):
        model = CILModel(backbone, m)
        model.new_task([0, 1])
        counts[m] = model.trainable_adapter_params() // len(model.layers)
    assert counts["nota"] == 384 <= counts["lora_gn"] == 384
    model = CILModel(backbone, "nota", learn_gamma=True)
    model.new_task([0, 1])
    assert model.trainable_adapter_params() // len(model.layers) == 385   # + gamma, excluded from check 10


def test_cil_metrics_known_values():
    acc = np.array([[0.9, np.nan, np.nan], [0.7, 0.8, np.nan], [0.5, 0.6, 0.9]])
    m = cil_metrics(acc)
    assert m["A_t"] == pytest.approx([0.9, 0.75, (0.5 + 0.6 + 0.9) / 3])
    assert m["A_last"] == pytest.approx(2 / 3)
    assert m["F"] == pytest.approx(((0.9 - 0.5) + (0.8 - 0.6)) / 2)


def test_run_cil_end_to_end_and_checkpoint(backbone):
    tr, te = fake_task([0, 1, 2, 3], n=8), fake_task([0, 1, 2, 3], n=4, seed=5)
    r = run_cil(backbone, "nota", [[0, 1], [2, 3]], tr, te, QUICK, seed=0)
    assert len(r["acc"]) == 2 and 0 <= r["A_last"] <= 1
    model = r["model"]
    ck = save_adapters(model)
    other = CILModel(backbone, "nota")
    for cs in ([0, 1], [2, 3]):
        other.new_task(cs)
    load_adapters(other, ck)
    x = te[0][:5]
    assert np.array_equal(predict(other, x), predict(model, x))
    short = CILModel(backbone, "nota")
    short.new_task([0, 1])
    with pytest.raises(ValueError, match="n_tasks"):
        load_adapters(short, ck)
    bond2 = CILModel(backbone, "nota", bond=2)
    for cs in ([0, 1], [2, 3]):
        bond2.new_task(cs)
    with pytest.raises(ValueError, match="bond"):
        load_adapters(bond2, ck)
    ncm = run_cil(backbone, "ncm", [[0, 1], [2, 3]], tr, te)
    assert ncm["trainable_per_task"] == 0 and 0 <= ncm["A_last"] <= 1


def test_cil_bad_inputs(backbone):
    with pytest.raises(ValueError, match="overlaps"):
        check_tasks([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="empty"):
        check_tasks([[0], []])
    with pytest.raises(ValueError, match="not found"):
        attach_adapters(HybridViT(dim=64, depth=1), targets=("q", "qkv"))
    with pytest.raises(ValueError, match="method"):
        CILModel(backbone, "lora_fancy")
    model = CILModel(backbone, "nota")
    model.new_task([0, 1])
    with pytest.raises(ValueError, match="outside the current task"):
        train_task(model, *fake_task([2]), QUICK, torch.Generator())
    with pytest.raises(ValueError, match="shape"):
        check_images(np.zeros((2, 28, 28), np.float32))
    with pytest.raises(ValueError, match="3-dimensional"):
        check_images(np.zeros((2, 1, 32, 32), np.float32))
    with pytest.raises(ValueError, match="finite"):
        check_images(np.full((1, 32, 32), np.nan, np.float32))
    with pytest.raises(ValueError, match=r"\[0, 255\]"):
        check_images(np.full((1, 32, 32), 300, np.int64))
    assert check_images(np.full((1, 32, 32), 255, np.uint8)).max() == 1.0


def test_glyphs_deterministic_and_distinct(tmp_path, monkeypatch):
    monkeypatch.setenv("NEURIPS26_CACHE", str(tmp_path))
    x1, y1 = synth_glyphs([0, 5], 3, seed=4)
    x2, _ = synth_glyphs([0, 5], 3, seed=4, cache=False)
    x3, _ = synth_glyphs([0, 5], 3, seed=5, cache=False)
    assert np.array_equal(x1, x2) and not np.array_equal(x1, x3)
    assert x1.shape == (6, 32, 32) and x1.dtype == np.float32 and 0 <= x1.min() and x1.max() <= 1
    assert list(y1) == [0, 0, 0, 5, 5, 5] and x1.mean() > 0.03
    assert list(tmp_path.glob("nota/glyphs-*.npz"))


def test_model_scope_in_the_loop(backbone):
    model = CILModel(backbone, "nota", scope="model")
    g = torch.Generator().manual_seed(0)
    model.new_task([0, 1], g)
    train_task(model, *fake_task([0, 1]), QUICK, g)
    with torch.no_grad():
        total = sum(float(lay.delta().pow(2).sum()) for lay in model.layers) ** 0.5
    assert 0.5 * model.scope.gamma < total <= model.scope.gamma * (1 + 1e-6)
    x = torch.from_numpy(fake_task([0])[0][:4])
    prev = model.features(x).detach()
    model.new_task([2, 3], g)
    assert (model.features(x) - prev).abs().max() < 1e-6
    with pytest.raises(ValueError, match="scope"):
        CILModel(backbone, "nota", scope="network")


def test_joint_upper_bound_and_digits(backbone):
    tr, te = fake_task([0, 1, 2, 3], n=8), fake_task([0, 1, 2, 3], n=4, seed=5)
    r = run_cil(backbone, "joint", [[0, 1], [2, 3]], tr, te, QUICK)
    assert len(r["acc"][0]) == 2 and r["F"] == 0.0 and r["model"].rows[0].shape[0] == 4
    from neurips26.nota.data import digits
    xtr, ytr, xte, yte = digits(seed=0)
    assert xtr.shape[1:] == (32, 32) and len(xtr) + len(xte) == 1797 and 0 <= xtr.min() and xtr.max() <= 1
    assert sorted(set(ytr.tolist())) == list(range(10)) and abs(len(xte) / 1797 - 0.3) < 0.01


def test_adapter_options():
    torch.manual_seed(3)
    base = torch.nn.Linear(64, 64)
    dota = AdaptedLinear(base, rule="plain", init="dota", bond=16)
    dota.new_task()
    assert torch.allclose(dota.task_deltas()[0], base.weight, atol=1e-5)   # full bond: TT-SVD of W0
    lg = AdaptedLinear(base, rule="global", learn_gamma=True, rho=0.05, rho_max=0.1)
    lg.new_task()
    with torch.no_grad():
        lg.gamma_param.fill_(10.0)
    assert float(lg.gamma) == pytest.approx(0.1 * lg.w0_norm)            # clamped to rho_max ||W0||
    prod = AdaptedLinear(base, kind="lora", rule="taskwise", norm="product")
    for _ in range(2):
        prod.new_task()
        with torch.no_grad():
            prod.adapters[-1].b.normal_()
    a0, d = prod.adapters[0], prod.task_deltas()
    expected = d[0] / (a0.b.norm() * a0.a.norm()) + d[1]
    assert torch.allclose(prod.delta(), expected, atol=1e-6)
    frz = AdaptedLinear(base, rule="hier", freeze_hier_after_task=True)
    for _ in range(3):
        frz.new_task()
    assert not any(p.requires_grad for p in frz.mods[0]) and all(p.requires_grad for p in frz.mods[1])
    live = AdaptedLinear(base, rule="hier")
    for _ in range(3):
        live.new_task()
    assert all(p.requires_grad for ml in live.mods for p in ml)
    assert [a.requires_grad for a in live.alphas] == [True, True, True]
    with torch.no_grad():
        live.mods[0][0].add_(1.0)
    assert float(live.hier_penalty()) == pytest.approx(16.0)
