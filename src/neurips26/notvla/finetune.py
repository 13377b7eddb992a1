"""Robot fine-tuning under one matched protocol, and the learned policies.

Every method gets the same demos, the same pre-trained checkpoint, the same optimiser (AdamW 3e-4,
cosine, batch 32) and the same number of gradient steps; ``mode="full"`` or ``"lora"`` (rank 8).
Methods (their training targets from the same demos):
- ``notvla``: decision frames (frame 0 and each waypoint arrival) -> the remaining narrative plan.
- ``dense_bin``: every step -> 4 bin tokens (256 new action tokens); queried every step.
- ``dense_chunk``: every step -> 8 steps x 4 bin tokens (32 tokens); queried every 8 steps.
- ``fast``: every step -> the FAST tokens of the next 16 steps (BPE ids as new tokens).
- ``actions_as_language``: every step -> 8 steps in words ("dx 1 . 2 dy - 0 . 3 dz 0 . 0 grip open ;").
The prompt is the instruction plus the gripper state ("gripper open" / "gripper closed").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.notvla.action_tokens import BinTokenizer, FASTTokenizer
from neurips26.notvla.backbone import TinyVLM, Vocab
from neurips26.notvla.camera import CameraShift
from neurips26.notvla.execution import OraclePolicy, Query, run_episodes
from neurips26.notvla.expert import run_expert
from neurips26.notvla.extraction import WaypointExtractor, encode_waypoints
from neurips26.notvla.detokenizer import sensor_depth
from neurips26.notvla.errors import DepthUnavailableError, PlanParseError
from neurips26.notvla.noanchor import advance_xyz, format_xyz, to_xyz, xyz_state_mask
from neurips26.notvla.plan import advance_state, format_plan, parse_plan, state_mask, strip_depth, tokenize
from neurips26.notvla.pretrain import Sample, train_steps
from neurips26.notvla.sim import ROBOT_COLOURS, TEMPLATES, TabletopSim

METHODS = ("notvla", "notvla_no_depth", "notvla_no_anchor", "dense_bin", "dense_chunk", "fast", "actions_as_language")
NOTVLA_VARIANTS = ("notvla", "notvla_no_depth", "notvla_no_anchor")  # plan writers (the rest are dense baselines)
CHUNK = {"dense_bin": 1, "dense_chunk": 8, "fast": 16, "actions_as_language": 8}
MODES = ("full", "lora")


def ee_words(ee) -> list[str]:
    """The end-effector position as text in whole cm: ``x 35 y - 2 z 25`` (proprioception, ASSUMPTION)."""
    out = []
    for name, v in zip(("x", "y", "z"), np.asarray(ee, dtype=float)[:3]):
        cm = int(round(float(v) * 100))
        out += [name] + (["-"] if cm < 0 else []) + [str(min(abs(cm), 100))]
    return out


def prompt_words(instruction: str, closed: bool, steps_done: int | None = None, ee=None) -> list[str]:
    """Instruction ; gripper state [x X y Y z Z: the end-effector position in cm (proprioception, optional)]
    [; the number of plan steps already executed (progress cue, optional)]."""
    out = instruction.split() + [";", "gripper", "closed" if closed else "open"]
    if ee is not None:
        out += ee_words(ee)
    if steps_done is not None:
        out += [";", str(min(int(steps_done), 100))]
    return out


@dataclass
class DemoRecord:
    demo: object
    task: object
    frames: list  # decision frames
    plans: list  # remaining plan (steps) at each decision frame
    anchor_z: list | None = None  # the most recent anchor top z before each decision frame (None: none)
    done: list | None = None  # plan steps executed before each decision frame


def collect_demos(n: int, seed: int, image_size: int = 64, colours=ROBOT_COLOURS) -> list[DemoRecord]:
    env = TabletopSim(image_size, colours=colours)
    X = WaypointExtractor()
    out = []
    for i in range(n):
        s = seed * 100_000 + i
        env.reset(seed=s, options={"template": TEMPLATES[i % 4]})
        demo = run_expert(env, np.random.default_rng(s))
        ex = X.extract(demo.positions, demo.gripper)
        full = encode_waypoints(demo.positions, ex.frames, ex.phases, demo.states[0], env.camera, env.task)
        frames = [0] + full.frames
        phases = ["approach"] + full.phases
        dec, plans, zs, done = [], [], [], []
        for k in range(len(full.steps)):
            f = frames[k]
            z = full.anchor_z[k - 1] if k >= 1 else None
            enc = encode_waypoints(
                demo.positions, frames, phases, demo.states[f], env.camera, env.task, first=k + 1, anchor_z=z
            )
            if enc.steps:
                dec.append(f)
                plans.append(enc.steps)
                zs.append(z)
                done.append(k)
        out.append(DemoRecord(demo, env.task, dec, plans, zs, done))
    return out


def _render_states(states, image_size: int) -> np.ndarray:
    env = TabletopSim(image_size)
    imgs = np.empty((len(states), image_size, image_size, 3), np.uint8)
    for i, st in enumerate(states):
        env.set_state(st)
        imgs[i] = env.render()
    return imgs


ANCHOR_STATES = frozenset({"colour", "shape", "U", "V", "DM", "DC"})  # the anchor's name, pixel and depth


def anchor_weights(tokens: list[str], w: float, depth: bool = True) -> tuple:
    """Per-token loss weights: ``w`` on the anchor tokens (object name, pixel, depth), 1 elsewhere."""
    state, out = "verb", []
    for t in tokens:
        out.append(w if state in ANCHOR_STATES else 1.0)
        state = advance_state(state, t, depth)
    return tuple(out)


def notvla_data(records: list[DemoRecord], image_size: int = 64, variant: str = "notvla",
                progress: bool = False, proprio: bool = False, anchor_weight: float = 1.0):
    """Decision frames -> remaining plan. ``variant``: ``notvla``; ``notvla_no_depth`` (no ``depth D``
    slots); ``notvla_no_anchor`` (absolute x y z in cm, ``noanchor``). ``progress``: the
    prompt also carries the number of plan steps executed (ASSUMPTION, off by default: the 64 x 64 frame
    shows the gripper as 1-2 grey pixels, so approach / grasp / retreat frames look alike). ``proprio``: the
    prompt carries the end-effector position in cm (``ee_words``; ASSUMPTION, the same for every method).
    ``anchor_weight``: the loss weight of the anchor tokens (``anchor_weights``; narrative variants only)."""
    check_choice(variant, "variant", NOTVLA_VARIANTS)
    env = TabletopSim(image_size)
    states, samples = [], []
    for r in records:
        for k, (f, plan) in enumerate(zip(r.frames, r.plans)):
            st = r.demo.states[f]
            if variant == "notvla_no_anchor":
                z = r.anchor_z[k] if r.anchor_z else None
                toks = tokenize(format_xyz(to_xyz(plan, env.camera, r.demo.positions[f], z)))
            else:
                toks = tokenize(format_plan(plan))
                toks = toks if variant == "notvla" else strip_depth(toks)
            k_done = (r.done[k] if r.done else k) if progress else None
            ee = r.demo.positions[f] if proprio else None
            wts = None
            if anchor_weight != 1.0 and variant != "notvla_no_anchor":
                wts = anchor_weights(toks, anchor_weight, depth=variant == "notvla")
            samples.append(Sample(len(states), prompt_words(r.demo.instruction, st["closed"], k_done, ee), toks,
                                  variant, wts))
            states.append(st)
    return samples, _render_states(states, image_size)


def action_words(a: np.ndarray) -> list[str]:
    """One action as words in cm with one decimal: dx 1 . 2 dy - 0 . 3 dz 0 . 0 grip open."""
    out = []
    for name, x in zip(("dx", "dy", "dz"), a[:3]):
        t = int(round(abs(x) * 1000))
        out += [name] + (["-"] if x < 0 and t else []) + [str(t // 10), ".", str(t % 10)]
    return out + ["grip", "closed" if a[3] > 0.5 else "open"]


class DenseCodec:
    """Action chunks <-> answer tokens for the dense baselines."""

    def __init__(self, method: str, vocab: Vocab, actions: np.ndarray):
        self.method = check_choice(method, "method", tuple(CHUNK))
        self.chunk = CHUNK[method]
        self.vocab = vocab
        if method in ("dense_bin", "dense_chunk"):
            self.bins = BinTokenizer().fit(actions)
            self.new_ids = vocab.add([f"<a{i}>" for i in range(256)])
        elif method == "fast":
            self.fast = None
            self._fit_fast = FASTTokenizer
            self.new_ids = []
        else:
            self.new_ids = []

    def fit_fast(self, chunks) -> None:
        self.fast = self._fit_fast().fit(chunks)
        self.new_ids = self.vocab.add([f"<f{i}>" for i in range(self.fast.bpe.get_vocab_size())])

    def encode(self, chunk: np.ndarray) -> list[str]:
        if self.method in ("dense_bin", "dense_chunk"):
            return [f"<a{b}>" for b in self.bins.encode(chunk).reshape(-1)]
        if self.method == "fast":
            return [f"<f{i}>" for i in self.fast.encode(chunk)]
        out = []
        for k, a in enumerate(chunk):
            out += ([";"] if k else []) + action_words(a)
        return out

    def decode(self, words: list[str]) -> np.ndarray:
        if self.method in ("dense_bin", "dense_chunk"):
            b = [int(w[2:-1]) for w in words if w.startswith("<a")]
            b = b[: len(b) // 4 * 4]
            if not b:
                raise ValueError("no complete action in the answer")
            return self.bins.decode(np.array(b).reshape(-1, 4))
        if self.method == "fast":
            return self.fast.decode([int(w[2:-1]) for w in words if w.startswith("<f")])
        acts, cur = [], []
        for w in words + [";"]:
            if w == ";":
                if cur:
                    acts.append(_parse_action_words(cur))
                cur = []
            else:
                cur.append(w)
        if not acts:
            raise ValueError("no action in the answer")
        return np.array(acts)


def _parse_action_words(ws: list[str]) -> np.ndarray:
    a = np.zeros(4)
    i = 0
    for j, name in enumerate(("dx", "dy", "dz")):
        if ws[i] != name:
            raise ValueError(f"expected {name!r}")
        i += 1
        sign = 1.0
        if ws[i] == "-":
            sign, i = -1.0, i + 1
        a[j] = sign * (int(ws[i]) + int(ws[i + 2]) / 10) / 100
        i += 3
    if ws[i] != "grip":
        raise ValueError("expected 'grip'")
    a[3] = 1.0 if ws[i + 1] == "closed" else 0.0
    return a


def dense_data(records: list[DemoRecord], codec: DenseCodec, image_size: int = 64, stride: int = 2,
               proprio: bool = False):
    states, samples, chunks, ees, instrs = [], [], [], [], []
    for r in records:
        A = r.demo.actions
        A = np.concatenate([A[:, :3], (A[:, 3:] > 0.5).astype(float)], 1)
        for t in range(0, len(A), stride):
            c = A[t : t + codec.chunk]
            if len(c) < codec.chunk:
                c = np.vstack([c, np.tile([0.0, 0.0, 0.0, c[-1, 3]], (codec.chunk - len(c), 1))])
            chunks.append(c)
            states.append(r.demo.states[t])
            ees.append(r.demo.positions[t] if proprio else None)
            instrs.append(r.demo.instruction)
    if codec.method == "fast":
        codec.fit_fast(chunks)
    for i, (st, c) in enumerate(zip(states, chunks)):
        samples.append(Sample(i, prompt_words(instrs[i], st["closed"], None, ees[i]), codec.encode(c), codec.method))
    return samples, _render_states(states, image_size)


def finetune(
    model: TinyVLM,
    vocab: Vocab,
    samples,
    images,
    steps: int,
    mode: str = "full",
    batch: int = 32,
    lr: float = 3e-4,
    seed: int = 0,
    log=None,
) -> list[float]:
    """The matched protocol: AdamW, cosine, ``steps`` gradient steps (full or LoRA-r8)."""
    steps = check_scalar(steps, "steps", int, min=1)
    check_choice(mode, "mode", MODES)
    if model.vocab_size < len(vocab):
        model.add_tokens(len(vocab) - model.vocab_size)
    if mode == "lora":
        model.apply_lora(8)
    return train_steps(model, vocab, samples, images, steps, batch, lr, seed, log)


class NoTVLAPolicy:
    """The fine-tuned model as a plan writer: greedy decoding constrained by the plan grammar."""

    def __init__(self, model: TinyVLM, vocab: Vocab, max_tokens: int = 120, depth: bool = True,
                 grammar: str = "narrative", progress: bool = False, proprio: bool = False):
        """``depth=False``: the no-depth ablation -- the model writes ``at (U, V) height H`` and the depth
        of each anchor is read from the depth sensor at that pixel (3 x 3 median for holes).
        ``grammar="xyz"``: the no-anchor ablation's absolute-position text (``noanchor``)."""
        self.model, self.vocab, self.max_tokens, self.depth = model, vocab, max_tokens, depth
        self.grammar = check_choice(grammar, "grammar", ("narrative", "xyz"))
        self.progress = progress  # prompt with the steps executed (as notvla_data(progress=True) trains)
        self.proprio = proprio  # prompt with the end-effector position (as notvla_data(proprio=True) trains)
        self.eos = vocab.index["<eos>"]
        self._masks: dict[str, torch.Tensor] = {}  # automaton state -> mask over the vocabulary
        self._rows: dict[int, tuple[int, str]] = {}  # row -> (tokens consumed, automaton state)

    def _state_mask(self, state: str) -> torch.Tensor:
        """``allowed_next`` for every prefix ending in ``state`` (it depends on the state only), memoised."""
        if state not in self._masks:
            words = self.vocab.words
            ok = state_mask(state, words) if self.grammar == "narrative" else xyz_state_mask(state, words)
            if not any(ok):  # complete plan: only <eos>
                ok = [w == "<eos>" for w in words]
            self._masks[state] = torch.tensor(ok)
        return self._masks[state]

    def _mask(self, gen_ids: list[int], row: int = 0):
        """The grammar mask after ``gen_ids``, advancing the automaton by the newest token only."""
        n, state = self._rows.get(row, (0, "verb"))
        if len(gen_ids) < n:
            n, state = 0, "verb"
        words = self.vocab.decode(gen_ids[n:])
        if gen_ids and self.vocab.words[gen_ids[-1]] == "<eos>":
            return None
        for w in words:  # every generated word passed the mask, so the automaton accepts it
            state = advance_state(state, w, self.depth) if self.grammar == "narrative" else advance_xyz(state, w)
        self._rows[row] = (len(gen_ids), state)
        return self._state_mask(state)

    def __call__(self, q: Query) -> str:
        return self.batch([q])[0]

    def batch(self, queries: list[Query]) -> list[str]:
        """One batched, grammar-masked greedy decode for several decision points (lockstep rollouts)."""
        prompts = [
            self.vocab.encode(prompt_words(q.instruction, q.closed, q.steps_done if self.progress else None,
                                           q.ee if self.proprio else None))
            + [self.vocab.index["<bos>"]]
            for q in queries
        ]
        self._rows = {}
        gen = self.model.generate(
            torch.from_numpy(np.stack([q.rgb for q in queries])),
            prompts,
            self.max_tokens,
            self.eos,
            allowed=lambda r, g: self._mask(g, r),
        )
        texts = []
        for q, g in zip(queries, gen):
            words = [w for w in self.vocab.decode(g) if w != "<eos>"]
            if self.grammar == "xyz":
                texts.append(" ".join(words))
            else:
                texts.append(_join(words if self.depth else _fill_sensor_depth(words, q.depth)))
        return texts


def _fill_sensor_depth(words: list[str], depth_image: np.ndarray) -> list[str]:
    """Insert ``depth DM . DC`` after each anchor pixel ``at ( U , V )``, read from the depth image there
    (``sensor_depth``); an unreadable pixel leaves the text as written (then it does not parse)."""
    H, W = depth_image.shape
    out = []
    for i, w in enumerate(words):
        out.append(w)
        if w == ")" and i >= 4 and words[i - 4] == "(" and words[i - 2] == ",":
            try:
                U, V = int(words[i - 3]), int(words[i - 1])
                d = sensor_depth(depth_image, np.array([(U + 0.5) * W / 100, (V + 0.5) * H / 100]))
            except (ValueError, DepthUnavailableError):
                continue
            cm = int(round(d * 100))
            out += ["depth", str(cm // 100), ".", str(cm % 100)]
    return out


def _join(words: list[str]) -> str:
    """Words -> canonical plan text (spacing of format_plan)."""
    text = " ".join(words)
    return text.replace("( ", "(").replace(" ,", ",").replace(" )", ")")


def rollout_dense(
    model: TinyVLM,
    vocab: Vocab,
    codec: DenseCodec,
    seeds: list[int],
    image_size: int = 64,
    shift: CameraShift | None = None,
    colours=ROBOT_COLOURS,
    rewrite=None,
    max_steps: int = 300,
    proprio: bool = False,
) -> list[dict]:
    """Dense policies in lockstep over several episodes (one batched query per chunk)."""
    envs = []
    for i, s in enumerate(seeds):
        e = TabletopSim(image_size, colours=colours, camera_shift=shift)
        e.reset(seed=s, options={"template": TEMPLATES[i % 4]})
        envs.append(e)
    instr = [rewrite(e.instruction(), i) if rewrite else e.instruction() for i, e in enumerate(envs)]
    done = [False] * len(envs)
    calls = [0] * len(envs)
    tokens = [0] * len(envs)
    eos = vocab.index["<eos>"]
    allowed_ids = torch.zeros(len(vocab), dtype=torch.bool)
    if codec.new_ids:
        allowed_ids[codec.new_ids] = True
    else:
        allowed_ids[:] = True
    if codec.method not in ("dense_bin", "dense_chunk"):  # bins: exactly 4 tokens per step, no early stop
        allowed_ids[eos] = True
    n_tok = 4 * codec.chunk if codec.method in ("dense_bin", "dense_chunk") else 64 * codec.chunk
    while not all(done):
        live = [i for i, d in enumerate(done) if not d]
        imgs = torch.from_numpy(np.stack([envs[i].render() for i in live]))
        prompts = [
            vocab.encode(prompt_words(instr[i], envs[i].closed, None, envs[i].ee if proprio else None))
            + [vocab.index["<bos>"]]
            for i in live
        ]
        gen = model.generate(imgs, prompts, n_tok, eos, allowed=allowed_ids)
        for j, i in enumerate(live):
            calls[i] += 1
            tokens[i] += len(gen[j])
            try:
                acts = codec.decode([w for w in vocab.decode(gen[j]) if w != "<eos>"])
            except (ValueError, IndexError):
                acts = np.array([[0.0, 0.0, 0.0, float(envs[i].closed)]])
            for a in acts[: codec.chunk]:
                term, trunc = envs[i].advance(a)
                if term or trunc or envs[i].t >= max_steps:
                    done[i] = True
                    break
    return [
        {"success": bool(e.success()), "calls": c, "tokens": t, "steps": e.t}
        for e, c, t in zip(envs, calls, tokens)
    ]


def rollout_notvla(
    policy: NoTVLAPolicy,
    seeds: list[int],
    image_size: int = 64,
    shift=None,
    colours=ROBOT_COLOURS,
    rewrite=None,
    max_calls: int = 15,
    detokenizer=None,
    max_steps: int = 300,
) -> list[dict]:
    """NoTVLA episodes in lockstep: one batched plan-writing call per round of decision points."""
    envs, instrs = [], []
    for i, s in enumerate(seeds):
        env = TabletopSim(image_size, colours=colours, camera_shift=shift)
        env.reset(seed=s, options={"template": TEMPLATES[i % 4]})
        envs.append(env)
        instrs.append(rewrite(env.instruction(), i) if rewrite else None)
    res = run_episodes(envs, policy, detokenizer, instructions=instrs, max_calls=max_calls, max_steps=max_steps)
    return [
        {
            "success": bool(getattr(r, "success", False)),
            "calls": getattr(r, "calls", 0),
            "tokens": getattr(r, "tokens", 0),
            "steps": env.t,
            "parse_failures": getattr(r, "parse_failures", 0),
            "plan": r.plans[0] if getattr(r, "plans", None) else "",
        }
        for env, r in zip(envs, res)
    ]


def first_step_grounding(policy: NoTVLAPolicy, seeds: list[int], image_size: int = 64) -> dict:
    """How the plan writer grounds its first step on each episode's initial frame, against the oracle plan's
    first step (``OraclePolicy``): the object named (colour and shape) and the anchor pixel's L_inf error on
    the 0-99 grid (2 cm is ~2-2.5 grid units at 64 x 64; the grasp needs the gripper within 2 cm). Episode
    ``i`` uses seed ``seeds[i]`` and template ``i % 4``, as ``rollout_notvla``. Narrative grammar only."""
    env = TabletopSim(image_size)
    name_ok, parse_fail, errs = 0, 0, []
    for i, s in enumerate(seeds):
        env.reset(seed=s, options={"template": TEMPLATES[i % 4]})
        o = env.observe()
        q = Query(o["rgb"], o["depth"].astype(np.float64), env.closed, env.instruction(), 0, env.ee.copy())
        truth = parse_plan(OraclePolicy(seed=s).reset(env)(q))[0]
        try:
            step = parse_plan(policy(q))[0]
        except PlanParseError:
            parse_fail += 1
            continue
        name_ok += (step.colour, step.shape) == (truth.colour, truth.shape)
        if step.u is not None:
            errs.append(max(abs(step.u - truth.u), abs(step.v - truth.v)))
    e = np.array(errs, dtype=float)
    return {
        "n": len(seeds),
        "name_ok": int(name_ok),
        "parse_failures": int(parse_fail),
        "linf": [int(x) for x in errs],
        "linf_median": float(np.median(e)) if len(e) else float("nan"),
        "linf_le2": int((e <= 2).sum()),
    }
