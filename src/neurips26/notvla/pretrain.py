"""VL pre-training (the "internet" prior) and the semantic-retention probes.

Scenes come from the same renderer with random cameras from a broad distribution (azimuth +-35 deg,
elevation +-12 deg, distance x0.8-1.2), all 8 colours and no robot episodes. Question families:
captions (objects left to right), attribute VQA, counting, yes/no spatial relations, pointing on the
0-99 grid ("( 41 , 57 )"), depth reading ("0 . 62") and synonym referring. Purple, orange and every
synonym appear here and never in robot data. Loss: next-token cross-entropy on the answer.

Retention probes (no further training): attribute/counting/relation accuracy, pointing accuracy
(L_inf <= 4 grid units), depth MAE and caption token F1; retention = post / pre per probe (pre / post for
depth MAE), averaged over the probes whose pre-trained score is at least twice chance.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from neurips26.harness.cache import cache_dir
from neurips26.harness.validation import check_scalar
from neurips26.notvla.backbone import BackboneConfig, TinyVLM, Vocab
from neurips26.notvla.camera import Camera, CameraShift
from neurips26.notvla.language import COLOUR_SYNONYMS, SHAPE_SYNONYMS
from neurips26.notvla.scene import COLOURS, render
from neurips26.notvla.sim import EE_START, TEMPLATES, sample_scene

POINT_TOL = 4
PROBES = ("attribute", "counting", "relation", "pointing", "depth", "caption")
CHANCE = {
    "attribute": 1 / 8,
    "counting": 1 / 4,
    "relation": 1 / 2,
    "pointing": (9 / 100) ** 2,
    "caption": 0.05,
}
DEPTH_CHANCE_MAE = 0.12  # predicting the mean depth of the workspace
_INV_C = {}
for _k, _v in COLOUR_SYNONYMS.items():
    _INV_C.setdefault(_v, []).append(_k)
_INV_S = {}
for _k, _v in SHAPE_SYNONYMS.items():
    _INV_S.setdefault(_v, []).append(_k)


@dataclass
class Sample:
    image: int  # index into the image array
    prompt: list[str]
    answer: list[str]
    kind: str
    weights: tuple | None = None  # per answer token loss weight (None: 1 each; <eos> always 1)


def scene_pool(n: int, rng: np.random.Generator, image_size: int = 64, robot_views: float = 0.0):
    """``n`` rendered scenes with random cameras: images (n, H, W, 3) uint8 and scene records.

    ``robot_views``: the fraction of scenes seen from the robot's head pose (the unshifted camera) with the
    grey gripper drawn somewhere above the workspace, as robot frames look (all 8 colours, no episodes).
    """
    images = np.empty((n, image_size, image_size, 3), np.uint8)
    scenes = []
    for i in range(n):
        robot = robot_views > 0 and rng.random() < robot_views
        if robot:
            shift = CameraShift()
        else:
            shift = CameraShift(
                float(rng.uniform(-35, 35)), float(rng.uniform(-12, 12)), float(rng.uniform(0.8, 1.2))
            )
        cam = Camera(image_size, shift=shift)
        objs, _ = sample_scene(rng, TEMPLATES[int(rng.integers(4))], tuple(COLOURS))
        ee = (rng.uniform((0.25, -0.25, 0.08), (0.65, 0.25, 0.3)) if rng.random() < 0.8 else np.array(EE_START)
              ) if robot else None
        v = render(cam, objs, ee)
        images[i] = v["rgb"]
        rec = []
        for o in objs:
            uv, z = cam.project(o.top)
            visible = bool((v["seg"] == o.id).any())
            rec.append(
                {
                    "colour": o.colour,
                    "kind": o.kind,
                    "uv": uv,
                    "z": float(z),
                    "grid": cam.to_grid(uv),
                    "visible": visible,
                }
            )
        scenes.append(rec)
    return images, scenes


def _name(o, rng, synonyms: bool) -> list[str]:
    c, s = o["colour"], o["kind"]
    if synonyms and rng.random() < 0.5:
        c = _INV_C.get(c, [c])[int(rng.integers(len(_INV_C.get(c, [c]))))]
        s = _INV_S.get(s, [s])[int(rng.integers(len(_INV_S.get(s, [s]))))]
    return [c, s]


def depth_words(z: float) -> list[str]:
    cm = int(round(z * 100))
    return [str(cm // 100), ".", str(cm % 100)]


def questions(
    rec: list[dict], rng: np.random.Generator, image: int, k: int, synonyms: bool = True
) -> list[Sample]:
    """``k`` question/answer pairs about one scene."""
    vis = [o for o in rec if o["visible"]]
    out: list[Sample] = []
    if not vis:
        return out
    kinds = [o["kind"] for o in rec]
    for _ in range(k):
        q = PROBES[int(rng.integers(len(PROBES)))]
        o = vis[int(rng.integers(len(vis)))]
        if q == "caption":
            order = sorted(vis, key=lambda r: r["uv"][0])
            ans = []
            for j, r in enumerate(order):
                ans += ([","] if j else []) + [r["colour"], r["kind"]]
            out.append(Sample(image, ["describe", "the", "scene"], ans, q))
        elif q == "attribute" and kinds.count(o["kind"]) == 1:
            out.append(Sample(image, ["what", "colour", "is", "the", o["kind"], "?"], [o["colour"]], q))
        elif q == "counting":
            s = o["kind"]
            out.append(Sample(image, ["how", "many", s + "s", "are", "there", "?"], [str(kinds.count(s))], q))
        elif q == "relation" and len(vis) >= 2:
            o2 = vis[int(rng.integers(len(vis)))]
            if o2 is o:
                continue
            rel = "left" if rng.random() < 0.5 else "right"
            truth = (o["uv"][0] < o2["uv"][0]) == (rel == "left")
            out.append(
                Sample(
                    image,
                    ["is", "the", *_name(o, rng, synonyms), rel, "of", "the", *_name(o2, rng, synonyms), "?"],
                    ["yes" if truth else "no"],
                    q,
                )
            )
        elif q == "pointing":
            U, V = o["grid"]
            if 0 <= U < 100 and 0 <= V < 100:
                out.append(
                    Sample(
                        image,
                        ["point", "to", "the", *_name(o, rng, synonyms)],
                        ["(", str(U), ",", str(V), ")"],
                        q,
                    )
                )
        elif q == "depth":
            out.append(
                Sample(
                    image, ["how", "far", "is", "the", *_name(o, rng, synonyms), "?"], depth_words(o["z"]), q
                )
            )
    return out


@dataclass(frozen=True)
class PretrainSettings:
    steps: int = 600
    scenes: int = 2000
    batch: int = 32
    questions_per_scene: int = 16
    lr: float = 1e-3  # pre-training only; fine-tuning keeps the matched protocol's 3e-4
    warmup: float = 0.05  # fraction of the steps with a linear warm-up before the cosine
    per_sample: bool = True  # loss = mean over samples of each answer's mean token CE
    grounding_weight: float = 2.0  # pointing and depth questions drawn this many times as often
    seed: int = 0
    robot_views: float = 0.0  # fraction of the scenes seen from the robot's head camera (``scene_pool``)
    numeric_sigma: float = 0.0  # integer answers: Gaussian soft targets of this width in value units (0: CE)
    colour_first: float = 0.0  # curriculum: this fraction of the steps first points at a colour ("the red object")


def batch_tensors(vocab: Vocab, samples: list[Sample], images: np.ndarray, n_visual: int = 16):
    """Pad (prompt, answer) pairs: tokens (B, L), prefix lengths (B,), targets (B, L) with -100 off-answer."""
    seqs, pre, tgt = [], [], []
    eos = vocab.index["<eos>"]
    for s in samples:
        p = vocab.encode(s.prompt) + [vocab.index["<bos>"]]
        a = vocab.encode(s.answer) + [eos]
        seqs.append(p + a[:-1])
        pre.append(n_visual + len(p))
        tgt.append([-100] * (len(p) - 1) + a)
    L = max(len(x) for x in seqs)
    tok = torch.zeros(len(seqs), L, dtype=torch.long)
    tg = torch.full((len(seqs), L), -100, dtype=torch.long)
    for i, (x, t) in enumerate(zip(seqs, tgt)):
        tok[i, : len(x)] = torch.tensor(x)
        tg[i, : len(t)] = torch.tensor(t)
    imgs = torch.from_numpy(images[[s.image for s in samples]])
    return imgs, tok, torch.tensor(pre), tg


def answer_weights(samples: list[Sample], tg: torch.Tensor) -> torch.Tensor | None:
    """(B, L) loss weights aligned with ``batch_tensors``' targets (None when no sample carries weights)."""
    if all(s.weights is None for s in samples):
        return None
    w = torch.ones(tg.shape, dtype=torch.float32)
    for i, s in enumerate(samples):
        if s.weights is not None:
            pos = (tg[i] != -100).nonzero().flatten()[: len(s.weights)]
            w[i, pos] = torch.tensor(s.weights[: len(pos)], dtype=torch.float32)
    return w


def numeric_targets(vocab: Vocab, sigma: float) -> tuple[torch.Tensor, torch.Tensor] | None:
    """For ``lm_loss``'s ``soft``: (value of each vocabulary id, -1 when not an integer token 0-100; the
    ids of the integer tokens in value order), or None when ``sigma`` is 0."""
    if sigma <= 0:
        return None
    ids = torch.tensor([vocab.index[str(i)] for i in range(101)])
    value = torch.full((len(vocab),), -1.0)
    value[ids] = torch.arange(101, dtype=torch.float32)
    return value, ids


def lm_loss(model: TinyVLM, imgs, tok, pre, tg, per_sample: bool = False, weights=None, soft=None,
            sigma: float = 0.0) -> torch.Tensor:
    """Next-token cross-entropy over the answer positions (the head runs at those positions only).

    ``per_sample=False``: the mean over all answer tokens of the batch (= the cross-entropy of the full
    logits with ``ignore_index=-100``); ``per_sample=True``: ``L = 1/B sum_b 1/|A_b| sum_{t in A_b} CE_t``,
    so a 40-token caption does not outweigh a 5-token pointing answer eightfold. ``weights`` (B, L, from
    ``answer_weights``): the token mean becomes ``sum w CE / sum w`` (``per_sample=False`` only).
    """
    keep = tg != -100
    h = model.hidden(imgs, tok, pre)[:, model.n_visual :][keep]
    logits = model.logits(h)
    ce = F.cross_entropy(logits, tg[keep], reduction="none")
    if soft is not None and sigma > 0:
        # integer answers (pointing / depth digits, counts): cross-entropy against a Gaussian over the
        # neighbouring integers, q_n ~ exp(-(n - y)^2 / (2 sigma^2)) (ASSUMPTION; the plain CE treats 41 and
        # 42 as unrelated classes), CE_t = -sum_n q_n log p_n
        value, ids = soft
        y = value[tg[keep]]
        num = y >= 0
        if num.any():
            q = torch.exp(-((torch.arange(101.0)[None] - y[num, None]) ** 2) / (2 * sigma**2))
            q = q / q.sum(1, keepdim=True)
            logp = F.log_softmax(logits[num], -1)[:, ids]
            ce = ce.clone()
            ce[num] = -(q * logp).sum(1)
    if weights is not None:
        if per_sample:
            raise ValueError("token weights apply to the token-mean loss (per_sample=False)")
        w = weights[keep]
        return (w * ce).sum() / w.sum()
    if not per_sample:
        return ce.mean()
    counts = keep.sum(1)
    row = torch.repeat_interleave(torch.arange(len(tg)), counts)
    per = torch.zeros(len(tg)).index_add_(0, row, ce) / counts.clamp(min=1)
    return per[counts > 0].mean()


def train_steps(
    model: TinyVLM,
    vocab: Vocab,
    samples: list[Sample],
    images: np.ndarray,
    steps: int,
    batch: int,
    lr: float,
    seed: int,
    log=None,
    warmup: float = 0.0,
    per_sample: bool = False,
    weights=None,
    sigma: float = 0.0,
    early_weights=None,
    early_steps: int = 0,
) -> list[float]:
    """AdamW with a cosine schedule over ``steps`` (the one optimiser of the matched protocol).

    lr(s) = lr * min(1, (s + 1) / w) * (1 + cos(pi * s / steps)) / 2 with w = ``warmup * steps`` warm-up
    steps; ``weights`` (one per sample) draws the batches non-uniformly (with replacement);
    ``early_weights`` replaces them for the first ``early_steps`` steps (a curriculum).
    """
    g = torch.Generator().manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.01, foreach=True)
    w = max(int(round(warmup * steps)), 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / w) * 0.5 * (1 + math.cos(math.pi * s / max(steps, 1)))
    )
    probs = None if weights is None else torch.as_tensor(weights, dtype=torch.float64)
    early = None if early_weights is None else torch.as_tensor(early_weights, dtype=torch.float64)
    soft = numeric_targets(vocab, sigma)
    losses = []
    model.train()
    for s in range(steps):
        p = early if early is not None and s < early_steps else probs
        if p is None:
            idx = torch.randint(len(samples), (batch,), generator=g).tolist()
        else:
            idx = torch.multinomial(p, batch, replacement=True, generator=g).tolist()
        chosen = [samples[i] for i in idx]
        b = batch_tensors(vocab, chosen, images, model.n_visual)
        loss = lm_loss(model, *b, per_sample=per_sample, weights=answer_weights(chosen, b[3]), soft=soft,
                       sigma=sigma)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if log is not None and (s + 1) % 100 == 0:
            log(f"step {s + 1}/{steps} loss {np.mean(losses[-100:]):.3f}")
    model.eval()
    return losses


def colour_pointing(samples: list[Sample], scenes: list[list[dict]]) -> list[Sample]:
    """The curriculum's first stage (``PretrainSettings.colour_first``, ASSUMPTION): each pointing question
    whose colour word names one visible object only, asked by colour alone ("point to the red object", the
    same answer), so that the pointer first learns to bind one word to one object's place."""
    out = []
    for q in samples:
        if q.kind != "pointing":
            continue
        c = COLOUR_SYNONYMS.get(q.prompt[3], q.prompt[3])
        if sum(o["visible"] and o["colour"] == c for o in scenes[q.image]) == 1:
            out.append(Sample(q.image, q.prompt[:4] + ["object"], q.answer, "pointing_colour"))
    return out


def config_hash(bcfg: BackboneConfig, settings: PretrainSettings) -> str:
    blob = json.dumps({"backbone": asdict(bcfg), "pretrain": asdict(settings), "v": 2}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def pretrain(bcfg: BackboneConfig, settings: PretrainSettings, cache: bool = True, log=None):
    """The pre-trained backbone (cached under ``cache_dir('notvla')`` by config hash) and its vocabulary."""
    # a fraction of the steps; 1 would never train full-name pointing (NaN / negative would switch it off)
    check_scalar(settings.colour_first, "colour_first", float, min=0, max=1, inclusive="left")
    vocab = Vocab()
    path = cache_dir("notvla") / f"backbone-{config_hash(bcfg, settings)}.pt"
    model = TinyVLM(bcfg, len(vocab))
    if cache and path.is_file():
        state = torch.load(path, map_location="cpu", weights_only=True)
        model.load_state_dict(state["model"])
        model.eval()
        return model, vocab, {"cached": True, "final_loss": state["final_loss"]}
    torch.manual_seed(settings.seed)
    rng = np.random.default_rng(settings.seed)
    images, scenes = scene_pool(settings.scenes, rng, bcfg.image_size, settings.robot_views)
    samples = [
        q for i, rec in enumerate(scenes) for q in questions(rec, rng, i, settings.questions_per_scene)
    ]
    if bcfg.numeric_init:
        model.init_numbers([vocab.index[str(i)] for i in range(101)])
    gw = settings.grounding_weight
    early, n_early = None, 0
    if settings.colour_first > 0:
        samples = samples + colour_pointing(samples, scenes)
        n_early = int(round(settings.colour_first * settings.steps))
        early = [gw if q.kind in ("pointing_colour", "depth") else 0.0 if q.kind == "pointing" else 1.0
                 for q in samples]
    weights = [gw if q.kind in ("pointing", "depth") else 0.0 if q.kind == "pointing_colour" else 1.0
               for q in samples]
    losses = train_steps(
        model, vocab, samples, images, settings.steps, settings.batch, settings.lr, settings.seed, log,
        warmup=settings.warmup, per_sample=settings.per_sample, weights=weights, sigma=settings.numeric_sigma,
        early_weights=early, early_steps=n_early,
    )
    final = float(np.mean(losses[-50:]))
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "final_loss": final}, tmp)
        tmp.replace(path)
    return model, vocab, {"cached": False, "final_loss": final}


# --- retention probes
def probe_set(n: int, seed: int, image_size: int = 64):
    rng = np.random.default_rng(10_000 + seed)
    images, scenes = scene_pool(max(n // 4, 4), rng, image_size)
    samples = [q for i, rec in enumerate(scenes) for q in questions(rec, rng, i, 6)]
    return images, samples[:n]


def answer(model: TinyVLM, vocab: Vocab, images: np.ndarray, samples: list[Sample], max_new: int = 12):
    eos = vocab.index["<eos>"]
    prompts = [vocab.encode(s.prompt) + [vocab.index["<bos>"]] for s in samples]
    imgs = torch.from_numpy(images[[s.image for s in samples]])
    gen = model.generate(imgs, prompts, max_new, eos)
    return [[w for w in vocab.decode(g) if w != "<eos>"] for g in gen]


def score_probes(model: TinyVLM, vocab: Vocab, images, samples) -> dict:
    """Per-probe score (accuracy; depth: MAE in metres; caption: token F1) and format rate."""
    preds = answer(model, vocab, images, samples)
    acc: dict[str, list[float]] = {p: [] for p in PROBES}
    fmt = []
    for s, p in zip(samples, preds):
        if s.kind in ("attribute", "counting", "relation"):
            acc[s.kind].append(float(p == s.answer))
            fmt.append(len(p) == 1)
        elif s.kind == "pointing":
            ok = (
                len(p) == 5
                and p[0] == "("
                and p[2] == ","
                and p[4] == ")"
                and p[1].isdigit()
                and p[3].isdigit()
            )
            fmt.append(ok)
            acc["pointing"].append(
                float(
                    ok
                    and max(abs(int(p[1]) - int(s.answer[1])), abs(int(p[3]) - int(s.answer[3]))) <= POINT_TOL
                )
            )
        elif s.kind == "depth":
            ok = len(p) == 3 and p[1] == "." and p[0].isdigit() and p[2].isdigit()
            fmt.append(ok)
            true = int(s.answer[0]) + int(s.answer[2]) / 100
            acc["depth"].append(abs(int(p[0]) + int(p[2]) / 100 - true) if ok else 1.0)
        else:
            a, b = set(p) - {","}, set(s.answer) - {","}
            inter = len(a & b)
            f1 = 0.0 if not inter else 2 * inter / (len(a) + len(b))
            acc["caption"].append(f1)
            fmt.append(bool(p))
    out = {k: float(np.mean(v)) if v else math.nan for k, v in acc.items()}
    out["format"] = float(np.mean(fmt)) if fmt else math.nan
    return out


def retention(pre: dict, post: dict) -> dict:
    """post/pre per probe (pre/post for depth MAE) over the probes at least twice chance before."""
    per, used = {}, []
    for k in PROBES:
        if not (math.isfinite(pre[k]) and math.isfinite(post[k])):
            continue
        if k == "depth":
            per[k] = pre[k] / max(post[k], 1e-6)
            if pre[k] <= DEPTH_CHANCE_MAE / 2:
                used.append(k)
        else:
            per[k] = post[k] / pre[k] if pre[k] > 0 else math.nan
            if pre[k] >= 2 * CHANCE[k]:
                used.append(k)
    mean = float(np.mean([min(per[k], 1.5) for k in used])) if used else math.nan
    return {"per_probe": per, "used": used, "mean": mean}
