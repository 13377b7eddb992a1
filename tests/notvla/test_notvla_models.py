"""Acceptance check 7 (tokenizers) and the backbone: prefix-LM mask, KV cache == full forward, new rows,
LoRA; retention arithmetic; Wilson / Newcombe known values; claim logic on synthetic metrics."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.notvla.action_tokens import BinTokenizer, FASTTokenizer
from neurips26.notvla.backbone import BackboneConfig, TinyVLM, Vocab
from neurips26.notvla.finetune import _parse_action_words, action_words
from neurips26.notvla.pretrain import retention
from neurips26.notvla.stats import newcombe, wilson


def _acts(n, seed=0):
    rng = np.random.default_rng(seed)
    return np.c_[rng.uniform(-0.02, 0.02, (n, 3)), rng.integers(0, 2, (n, 1))]


def test_bin_round_trip_within_half_a_bin_and_clipped_outside():
    a = _acts(2000)
    tok = BinTokenizer().fit(a)
    inside = np.all((a >= tok.lo) & (a <= tok.hi), axis=1)
    err = np.abs(tok.decode(tok.encode(a)) - a)[inside]
    assert np.all(err <= tok.width / 2 + 1e-12)
    far = np.array([[1.0, -1.0, 0.0, 0.0]])
    assert tok.encode(far)[0, 0] == 255 and tok.encode(far)[0, 1] == 0


def test_fast_round_trip_bound_and_lossless_bpe():
    chunks = [_acts(16, s) for s in range(150)]
    f = FASTTokenizer().fit(chunks)
    worst = 0.0
    for c in chunks[:50]:
        ids = f.encode(c)
        err = np.linalg.norm(f.normalise(f.decode(ids)) - f.normalise(c), axis=0)
        worst = max(worst, err.max())
        text = "".join(f.bpe.id_to_token(i) for i in ids)      # BPE is lossless on the integer string
        assert text == f._words(f.coefficients(c))
    assert worst <= 0.05 * math.sqrt(16)


@given(st.lists(st.floats(-0.05, 0.05), min_size=3, max_size=3), st.booleans())
@settings(max_examples=50, deadline=None)
def test_actions_as_language_round_trip(xyz, grip):
    a = np.array([*xyz, float(grip)])
    back = _parse_action_words(action_words(a))
    assert np.abs(back[:3] - a[:3]).max() <= 0.0005 + 1e-12 and back[3] == a[3]


def _model():
    torch.manual_seed(0)
    return TinyVLM(BackboneConfig(d_model=32, layers=2, heads=4), len(Vocab())).eval()


def test_prefix_mask_is_bidirectional_over_the_prefix_only():
    m = TinyVLM.prefix_mask(6, torch.tensor([3]))[0, 0]
    assert m[0, 2] and not m[0, 3] and m[4, 3] and not m[3, 4]


def test_kv_cache_decoding_equals_full_forward():
    m = _model()
    img = torch.randint(0, 255, (1, 64, 64, 3), dtype=torch.uint8)
    prompt = [5, 6, 7, 1]
    gen = m.generate(img, [prompt], 8, eos=-1)[0]
    seq = list(prompt)
    for _ in range(8):  # reference: recompute the whole sequence, prompt as prefix
        logits = m(img, torch.tensor([seq]), torch.tensor([16 + len(prompt)]))
        seq.append(int(logits[0, -1].argmax()))
    assert gen == seq[len(prompt):]


def test_visual_grid_and_keypoint_soft_argmax():
    img = torch.randint(0, 255, (2, 64, 64, 3), dtype=torch.uint8)
    torch.manual_seed(0)
    m8 = TinyVLM(BackboneConfig(d_model=32, layers=1, heads=2, grid=8), len(Vocab())).eval()
    assert m8.n_visual == 64 and m8.visual_tokens(img).shape == (2, 64, 32)
    prompt = [5, 6, 7, 1]  # the KV-cache decoder and the full forward agree with 64 visual tokens too
    gen = m8.generate(img[:1], [prompt], 3, eos=-1)[0]
    seq = list(prompt)
    for _ in range(3):
        seq.append(int(m8(img[:1], torch.tensor([seq]), torch.tensor([64 + len(prompt)]))[0, -1].argmax()))
    assert gen == seq[len(prompt):]
    with pytest.raises(ValueError, match="grid"):
        BackboneConfig(grid=9)
    # soft-argmax: one sharp peak in keypoint map 1 at map pixel (row 5, col 13) of the 32 x 32 map; cells
    # are 8 x 8 map pixels (grid 4), so it lies in cell (0, 1); its position in grid units is
    # ((13 + 0.5) * 100 / 32, (5 + 0.5) * 100 / 32) = (42.19, 17.19)
    m = TinyVLM(BackboneConfig(d_model=32, layers=1, heads=2, keypoints=2), len(Vocab())).eval()
    peak = torch.full((1, 2, 32, 32), -30.0)
    peak[0, 1, 5, 13] = 30.0
    class Fixed(torch.nn.Module):
        def forward(self, x):
            return peak.expand(len(x), -1, -1, -1)

    m.kp_conv = Fixed()
    f = m.keypoint_features(torch.zeros(1, 5, 64, 64)).view(1, 16, 2, 33)
    s = f[..., -1]
    assert s[0, 1, 1] > 0.99 and s[0, 1, 0] < 1e-6 and s[0, 0, 1] < 1e-6
    ang = 2 * math.pi * torch.tensor([42.1875, 17.1875])[:, None] / m.kp_period
    want = torch.cat([ang.sin(), ang.cos()], -1).flatten()
    assert torch.allclose(f[0, 1, 1, :32], want, atol=1e-4)


def test_future_answer_tokens_do_not_change_earlier_logits():
    m = _model()
    img = torch.randint(0, 255, (1, 64, 64, 3), dtype=torch.uint8)
    a = m(img, torch.tensor([[5, 6, 1, 9, 10]]), torch.tensor([19]))
    b = m(img, torch.tensor([[5, 6, 1, 9, 11]]), torch.tensor([19]))
    assert torch.allclose(a[0, :-1], b[0, :-1])


def test_add_tokens_keeps_old_logits_and_lora_starts_at_the_base():
    m = _model()
    img = torch.randint(0, 255, (2, 64, 64, 3), dtype=torch.uint8)
    tok = torch.randint(0, 100, (2, 6))
    pre = torch.tensor([18, 18])
    before = m(img, tok, pre)
    m.add_tokens(256)
    after = m(img, tok, pre)
    assert after.shape[-1] == before.shape[-1] + 256
    assert torch.allclose(after[..., :before.shape[-1]], before)
    m.apply_lora(8)
    assert torch.allclose(m(img, tok, pre), after, atol=1e-6)
    trainable = {n for n, p in m.named_parameters() if p.requires_grad}
    assert any(".A" in n for n in trainable) and not any("vision" in n for n in trainable)


def test_retention_excludes_near_chance_probes():
    pre = {"attribute": 0.8, "counting": 0.3, "relation": 0.9, "pointing": 0.5, "depth": 0.03,
           "caption": 0.6}
    post = {"attribute": 0.4, "counting": 0.3, "relation": 0.9, "pointing": 0.25, "depth": 0.06,
            "caption": 0.6}
    r = retention(pre, post)
    assert "counting" not in r["used"]          # 0.3 < 2 x chance (0.25)
    assert "relation" not in r["used"]          # yes/no: twice chance is a perfect score
    assert r["per_probe"]["depth"] == pytest.approx(0.5)
    assert r["mean"] == pytest.approx(np.mean([0.5, 0.5, 0.5, 1.0]))


def test_wilson_and_newcombe_known_values():
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.2366, abs=1e-4) and hi == pytest.approx(0.7634, abs=1e-4)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)
    lo, hi = newcombe(56, 70, 48, 80)   # Newcombe (1998), example (a): 0.0524 to 0.3339
    assert lo == pytest.approx(0.0524, abs=1e-3) and hi == pytest.approx(0.3339, abs=1e-3)
    with pytest.raises(ValueError, match="k"):
        wilson(11, 10)


def _metrics(k_ours, k_dense, n, ret_ours=0.95, ret_dense=0.5):
    s = {c: {"k": k_ours, "n": n} for c in ("id", "ood", "camera_shift")}
    d = {c: {"k": k_dense, "n": n} for c in ("id", "ood", "camera_shift")}
    return {"learned": {"success": {"notvla": s, "dense_chunk": d},
                        "retention": {"notvla": ret_ours, "dense_chunk": ret_dense},
                        "retention_detail": {"notvla": {"used": ["attribute"]}}}}


def test_claim_logic_on_synthetic_metrics():
    from neurips26.notvla import experiment as E

    claims = {c.id: c for c in E.CLAIMS}
    assert claims["semantic_ood"].evaluate(_metrics(9, 1, 10)).verdict == "holds"
    assert claims["semantic_ood"].evaluate(_metrics(5, 4, 10)).verdict == "inconclusive"
    assert claims["semantic_ood"].evaluate(_metrics(1, 9, 10)).verdict == "fails"
    assert claims["id_success_within_10pp"].evaluate(_metrics(9, 9, 10)).verdict == "inconclusive"
    assert claims["id_success_within_10pp"].evaluate(_metrics(48, 50, 60)).verdict == "holds"
    assert claims["id_success_within_10pp"].evaluate(_metrics(5, 55, 60)).verdict == "fails"
    assert claims["retention"].evaluate(_metrics(1, 1, 10)).verdict == "holds"
    assert claims["retention"].evaluate(_metrics(1, 1, 10, 0.5, 0.9)).verdict == "fails"
    assert claims["retention"].evaluate(_metrics(1, 1, 10, float("nan"), 0.9)).verdict == "inconclusive"
    assert claims["beats_pi0"].evaluate({}).verdict == "inconclusive"
    assert claims["fewer_calls"].evaluate({}).verdict == "inconclusive"   # metric missing


def test_lm_loss_on_answer_positions_equals_full_logits_loss():
    """The head at answer positions only gives the cross-entropy of the full forward (and its grads)."""
    import torch.nn.functional as F

    from neurips26.notvla.backbone import BackboneConfig, TinyVLM, Vocab
    from neurips26.notvla.pretrain import Sample, batch_tensors, lm_loss

    vocab = Vocab()
    torch.manual_seed(0)
    model = TinyVLM(BackboneConfig(d_model=32, layers=1, heads=2), len(vocab))
    images = np.random.default_rng(0).integers(0, 256, (3, 64, 64, 3), dtype=np.uint8)
    samples = [Sample(0, ["what", "colour", "is", "the", "cube", "?"], ["red"], "attribute"),
               Sample(1, ["point", "to", "the", "red", "cube"], ["(", "4", ",", "57", ")"], "pointing"),
               Sample(2, ["describe", "the", "scene"], ["red", "cube", ",", "blue", "bowl"], "caption")]
    b = batch_tensors(vocab, samples, images)
    fast = lm_loss(model, *b)
    logits = model(*b[:3])[:, model.n_visual:]
    ref = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), b[3].reshape(-1), ignore_index=-100)
    torch.testing.assert_close(fast, ref, rtol=1e-5, atol=1e-6)
    g_fast = torch.autograd.grad(fast, model.head.weight)[0]
    g_ref = torch.autograd.grad(ref, model.head.weight)[0]
    torch.testing.assert_close(g_fast, g_ref, rtol=1e-4, atol=1e-6)


def test_numeric_soft_targets():
    """A vanishing sigma gives the plain CE; with sigma 2 the loss of a near-miss integer (42 for 41) is lower
    than that of a far one (80), while the plain CE cannot tell them apart when both get the same probability."""
    import torch.nn.functional as F

    from neurips26.notvla.pretrain import numeric_targets, lm_loss, Sample, batch_tensors

    vocab = Vocab()
    torch.manual_seed(0)
    model = TinyVLM(BackboneConfig(d_model=32, layers=1, heads=2), len(vocab))
    images = np.random.default_rng(0).integers(0, 256, (1, 64, 64, 3), dtype=np.uint8)
    b = batch_tensors(vocab, [Sample(0, ["point", "to", "the", "red", "cube"], ["(", "41", ",", "7", ")"],
                                     "pointing")], images)
    soft = numeric_targets(vocab, 1e-3)
    torch.testing.assert_close(lm_loss(model, *b, soft=soft, sigma=1e-3), lm_loss(model, *b))
    assert numeric_targets(vocab, 0.0) is None
    logits = torch.zeros(2, len(vocab))
    logits[0, vocab.index["42"]] = logits[1, vocab.index["80"]] = 5.0
    value, ids = numeric_targets(vocab, 2.0)
    q = torch.exp(-((torch.arange(101.0) - 41) ** 2) / 8)
    q = q / q.sum()
    soft_ce = -(q * F.log_softmax(logits, -1)[:, ids]).sum(1)
    hard = F.cross_entropy(logits, torch.tensor([vocab.index["41"]] * 2), reduction="none")
    assert soft_ce[0] < soft_ce[1] and torch.isclose(hard[0], hard[1])
    # lm_loss itself at sigma 2, on fixed logits: integer targets against the Gaussian, the rest plain CE
    tg = b[3][b[3] != -100]
    fixed = torch.randn(len(tg), len(vocab), generator=torch.Generator().manual_seed(1))
    model.logits = lambda h: fixed[:len(h)]
    want = []
    for row, t in zip(fixed, tg.tolist()):
        if value[t] >= 0:
            q = torch.exp(-((torch.arange(101.0) - value[t]) ** 2) / (2 * 2.0 ** 2))
            want.append(-(q / q.sum() * F.log_softmax(row, -1)[ids]).sum())
        else:
            want.append(F.cross_entropy(row[None], torch.tensor([t])))
    assert sum(value[t] >= 0 for t in tg.tolist()) == 2                  # "41" and "7"
    torch.testing.assert_close(lm_loss(model, *b, soft=numeric_targets(vocab, 2.0), sigma=2.0),
                               torch.stack(want).mean())


def test_batched_plan_writer_equals_one_query_at_a_time():
    """NoTVLAPolicy.batch (one grammar-masked decode for several decision points) writes the same plans
    as querying each alone, and every plan passes the grammar."""
    from neurips26.notvla.backbone import BackboneConfig, TinyVLM, Vocab
    from neurips26.notvla.execution import Query
    from neurips26.notvla.finetune import NoTVLAPolicy
    from neurips26.notvla.plan import parse_plan
    from neurips26.notvla.sim import TabletopSim

    torch.manual_seed(1)
    vocab = Vocab()
    model = TinyVLM(BackboneConfig(d_model=32, layers=1, heads=2), len(vocab)).eval()
    pol = NoTVLAPolicy(model, vocab, max_tokens=40)
    env = TabletopSim(64)
    qs = []
    for s, template in enumerate(("pick", "bowl", "plate")):
        env.reset(seed=s, options={"template": template})
        o = env.observe()
        qs.append(Query(o["rgb"], o["depth"], bool(s % 2), env.instruction(), 0))
    together = pol.batch(qs)
    alone = [pol(q) for q in qs]
    assert together == alone
    assert len(set(together)) > 1 or len({q.instruction for q in qs}) == 1
    for t in together:
        if t.endswith("."):
            parse_plan(t)


def test_lockstep_episodes_equal_single_episodes():
    """run_episodes (lockstep, one policy round per decision point) == run_episode on each env alone."""
    from neurips26.notvla.execution import OraclePolicy, run_episode, run_episodes
    from neurips26.notvla.sim import TabletopSim

    def make(seeds):
        envs, pols = [], {}
        for i, s in enumerate(seeds):
            e = TabletopSim(64)
            e.reset(seed=s, options={"template": ("bowl", "stack")[i % 2]})
            pols[e.instruction()] = OraclePolicy(seed=s).reset(e)
            envs.append(e)
        return envs, pols

    seeds = [3, 4]
    envs, pols = make(seeds)
    assert len(pols) == len(seeds)  # distinct instructions route each query to its own oracle
    together = run_episodes(envs, lambda q: pols[q.instruction](q))
    envs2, pols2 = make(seeds)
    alone = [run_episode(e, lambda q, p=pols2[e.instruction()]: p(q)) for e in envs2]
    for a, b, e1, e2 in zip(together, alone, envs, envs2):
        assert (a.success, a.calls, a.tokens, a.plans, a.steps) == (b.success, b.calls, b.tokens, b.plans, b.steps)
        np.testing.assert_array_equal(e1.ee, e2.ee)


def test_per_sample_loss_and_number_init():
    """per_sample=True averages each answer's token CE first; init_numbers makes neighbouring integers'
    rows more alike than distant ones; visual tokens vary with the image at the scale of word tokens."""
    import torch.nn.functional as F

    from neurips26.notvla.backbone import BackboneConfig, TinyVLM, Vocab
    from neurips26.notvla.pretrain import Sample, batch_tensors, lm_loss

    vocab = Vocab()
    torch.manual_seed(0)
    model = TinyVLM(BackboneConfig(d_model=32, layers=1, heads=2), len(vocab))
    images = np.random.default_rng(0).integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    samples = [Sample(0, ["what", "colour", "is", "the", "cube", "?"], ["red"], "attribute"),
               Sample(1, ["describe", "the", "scene"], ["red", "cube", ",", "blue", "bowl"], "caption")]
    b = batch_tensors(vocab, samples, images)
    logits = model(*b[:3])[:, model.n_visual:]
    per = [F.cross_entropy(logits[i], b[3][i], ignore_index=-100) for i in range(2)]
    torch.testing.assert_close(lm_loss(model, *b, per_sample=True), (per[0] + per[1]) / 2, rtol=1e-5, atol=1e-6)
    ids = [vocab.index[str(i)] for i in range(101)]
    model.init_numbers(ids)
    h = F.normalize(model.head.weight[ids], dim=1)
    assert float((h[40] @ h[41]).detach()) > float((h[40] @ h[60]).detach()) + 0.2
    v = model.visual_tokens(torch.from_numpy(images))
    assert v.shape == (2, 16, 32) and float((v[0] - v[1]).std().detach()) > 0.1


def test_progress_cue_prompt():
    """progress=True: each decision frame's prompt ends with the plan steps executed before it (0, 1, ...)."""
    from neurips26.notvla.finetune import collect_demos, notvla_data, prompt_words

    recs = collect_demos(1, 0)
    plain, _ = notvla_data(recs)
    cued, _ = notvla_data(recs, progress=True)
    assert [s.prompt[-1] for s in cued] == [str(k) for k in recs[0].done]
    assert [s.prompt for s in plain] == [s.prompt[:-2] for s in cued]
    assert prompt_words("pick up the red cube", True, 3)[-2:] == [";", "3"]


def test_proprio_prompt_and_dense_instructions():
    """proprio=True: every prompt carries the end effector in whole cm (``x 35 y - 2 z 25``) after the gripper
    state, for the plan writer and the dense data alike; each dense sample has its own demo's instruction."""
    from neurips26.notvla.finetune import DenseCodec, collect_demos, dense_data, ee_words, notvla_data, prompt_words

    assert ee_words([0.354, -0.021, 0.25]) == ["x", "35", "y", "-", "2", "z", "25"]
    p = prompt_words("pick up the red cube", False, 2, [0.1, 0.0, 0.3])
    assert p == "pick up the red cube ; gripper open x 10 y 0 z 30 ; 2".split()
    recs = collect_demos(8, 0)  # two demos per template, with different instructions
    assert recs[0].demo.instruction != recs[4].demo.instruction and recs[0].task == recs[4].task
    plain, _ = notvla_data(recs[:1])
    prop, _ = notvla_data(recs[:1], proprio=True)
    for s0, s1, f in zip(plain, prop, recs[0].frames):
        assert s1.prompt == s0.prompt + ee_words(recs[0].demo.positions[f])
    vocab = Vocab()
    acts = np.concatenate([r.demo.actions for r in recs])
    S, _ = dense_data(recs, DenseCodec("dense_chunk", vocab, acts), proprio=True)
    n = 0
    for r in recs:
        for t in range(0, len(r.demo.actions), 2):
            want = prompt_words(r.demo.instruction, r.demo.states[t]["closed"], None, r.demo.positions[t])
            assert S[n].prompt == want
            n += 1
    assert n == len(S)


def test_anchor_weights_and_weighted_loss():
    """anchor_weights puts w on the anchor's name, pixel and depth tokens only; the weighted loss is
    sum(w CE) / sum(w) over the answer tokens, and weights of 1 give the plain loss."""
    import torch.nn.functional as F

    from neurips26.notvla.finetune import anchor_weights
    from neurips26.notvla.plan import tokenize
    from neurips26.notvla.pretrain import Sample, answer_weights, batch_tensors, lm_loss

    toks = tokenize("approach the red cube at (41, 57) depth 0 . 62 height 8 ; lift height 10 .")
    w = anchor_weights(toks, 5.0)
    assert [t for t, x in zip(toks, w) if x == 5.0] == ["red", "cube", "41", "57", "0", "62"]
    nd = tokenize("approach the red cube at (41, 57) height 8 .")
    assert [t for t, x in zip(nd, anchor_weights(nd, 3.0, depth=False)) if x == 3.0] == ["red", "cube", "41", "57"]
    vocab = Vocab()
    torch.manual_seed(0)
    model = TinyVLM(BackboneConfig(d_model=32, layers=1, heads=2), len(vocab))
    images = np.random.default_rng(0).integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    samples = [Sample(0, ["pick", "up", "the", "red", "cube"], toks, "notvla", w),
               Sample(1, ["describe", "the", "scene"], ["red", "cube"], "caption")]
    b = batch_tensors(vocab, samples, images)
    wt = answer_weights(samples, b[3])
    logits = model(*b[:3])[:, model.n_visual:]
    keep = b[3] != -100
    ce = F.cross_entropy(logits[keep], b[3][keep], reduction="none")
    want = torch.tensor(list(w) + [1.0] + [1.0, 1.0, 1.0])  # sample 0 answer + <eos>, sample 1 answer + <eos>
    torch.testing.assert_close(lm_loss(model, *b, weights=wt), (want * ce).sum() / want.sum(), rtol=1e-5, atol=1e-6)
    ones = [Sample(s.image, s.prompt, s.answer, s.kind, tuple([1.0] * len(s.answer))) for s in samples]
    torch.testing.assert_close(lm_loss(model, *b, weights=answer_weights(ones, b[3])), lm_loss(model, *b))
    assert answer_weights([samples[1]], b[3][1:]) is None
    with pytest.raises(ValueError):
        lm_loss(model, *b, per_sample=True, weights=wt)


def test_colour_first_curriculum(monkeypatch):
    """colour_first: pointing by colour alone only where that colour names one visible object; the early steps
    draw from the early weights (no full-name pointing), the later ones from the main weights (no colour-only)."""
    from neurips26.notvla import pretrain as P

    scenes = [[{"colour": "red", "kind": "cube", "visible": True}, {"colour": "red", "kind": "bowl", "visible": True}],
              [{"colour": "blue", "kind": "cube", "visible": True}, {"colour": "red", "kind": "bowl", "visible": False}]]
    samples = [P.Sample(0, ["point", "to", "the", "crimson", "cube"], ["(", "1", ",", "2", ")"], "pointing"),
               P.Sample(1, ["point", "to", "the", "navy", "cube"], ["(", "3", ",", "4", ")"], "pointing"),
               P.Sample(1, ["how", "many", "cubes", "are", "there", "?"], ["1"], "counting")]
    extra = P.colour_pointing(samples, scenes)
    assert [(q.image, q.prompt, q.answer, q.kind) for q in extra] == [
        (1, ["point", "to", "the", "navy", "object"], ["(", "3", ",", "4", ")"], "pointing_colour")]
    allk = samples + extra
    seen = []
    real = P.batch_tensors

    def spy(vocab, chosen, images, n_visual=16):
        seen.append({q.kind for q in chosen})
        return real(vocab, chosen, images, n_visual)

    monkeypatch.setattr(P, "batch_tensors", spy)
    vocab = P.Vocab()
    torch.manual_seed(0)
    model = P.TinyVLM(P.BackboneConfig(d_model=32, layers=1, heads=2), len(vocab))
    images = np.zeros((2, 64, 64, 3), np.uint8)
    P.train_steps(model, vocab, allk, images, 6, 8, 1e-3, 0, weights=[1, 1, 1, 0], early_weights=[0, 0, 1, 1],
                  early_steps=3)
    assert all(k <= {"counting", "pointing_colour"} for k in seen[:3]) and any("pointing_colour" in k for k in seen[:3])
    assert all("pointing_colour" not in k for k in seen[3:]) and any("pointing" in k for k in seen[3:])


@pytest.mark.parametrize("bad", [-0.1, 1.0, float("nan")])
def test_colour_first_out_of_range_raises_naming_it(bad):
    from neurips26.notvla import pretrain as P

    with pytest.raises(ValueError, match="colour_first"):
        P.pretrain(P.BackboneConfig(d_model=32, layers=1, heads=2), P.PretrainSettings(colour_first=bad), cache=False)
