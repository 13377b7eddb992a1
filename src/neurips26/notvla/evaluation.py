"""Evaluation drivers shared by the bench and the experiment: oracle-plan rollouts and the learned
policies (pre-train once, fine-tune every method under the matched protocol, probe retention, roll out)."""

from __future__ import annotations

import copy
import time

import numpy as np
import torch

from neurips26.harness.validation import check_scalar
from neurips26.notvla.backbone import TinyVLM
from neurips26.notvla.camera import CameraShift
from neurips26.notvla.detokenizer import Detokenizer
from neurips26.notvla.execution import OraclePolicy, run_episode
from neurips26.notvla.expert import run_expert
from neurips26.notvla.extraction import WaypointExtractor
from neurips26.notvla.finetune import (
    NOTVLA_VARIANTS,
    DenseCodec,
    NoTVLAPolicy,
    collect_demos,
    dense_data,
    finetune,
    first_step_grounding,
    notvla_data,
    rollout_dense,
    rollout_notvla,
)
from neurips26.notvla.noanchor import XYZDetokenizer
from neurips26.notvla.language import HELD_OUT_COLOURS, with_synonyms
from neurips26.notvla.plan import tokenize
from neurips26.notvla.pretrain import PretrainSettings, pretrain, probe_set, retention, score_probes
from neurips26.notvla.sim import TEMPLATES, DepthNoise, TabletopSim


def oracle_rollouts(n: int, image_size: int = 64, shift: CameraShift | None = None, seed0: int = 0,
                    detokenizer: Detokenizer | None = None, replan: str = "every_waypoint",
                    depth_noise: DepthNoise | None = None, workers: int = 1, backend: str = "auto") -> dict:
    """Oracle-plan episodes over the 4 templates: success, calls, tokens, and the expert's episode length.

    ``workers > 1``: the episodes are split into contiguous ranges run through
    ``harness.parallel.map_tasks`` (a process pool, or Ray actors when a Ray cluster is up); episode ``i``
    uses seed ``seed0 + i`` and template ``i % 4`` either way, so the result equals the serial one.
    """
    n = check_scalar(n, "n", int, min=1)
    workers = check_scalar(workers, "workers", int, min=1)
    args = (image_size, shift, seed0, detokenizer, replan, depth_noise)
    if workers == 1:
        return _oracle_range((0, n) + args)
    from neurips26.harness.parallel import map_tasks

    cuts = np.linspace(0, n, min(workers, n) + 1).round().astype(int)
    tasks = [(int(a), int(b)) + args for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
    parts = map_tasks(_oracle_range, tasks, backend=backend, workers=workers, progress=False)
    return {k: [x for p in parts for x in p[k]] for k in parts[0]}


def _oracle_range(task) -> dict:
    i0, i1, image_size, shift, seed0, detokenizer, replan, depth_noise = task
    env = TabletopSim(image_size, camera_shift=shift, depth_noise=depth_noise)
    X = WaypointExtractor()
    out = {
        k: []
        for k in ("success", "calls", "tokens", "tokens_never", "expert_steps", "train_tokens", "compression")
    }
    for i in range(i0, i1):
        s = seed0 + i
        env.reset(seed=s, options={"template": TEMPLATES[i % 4]})
        state = env.get_state()
        demo = run_expert(env, np.random.default_rng(s), record=False)
        ex = X.extract(demo.positions, demo.gripper)
        env.set_state(state)
        pol = OraclePolicy(seed=s).reset(env, demo, ex)  # the same demo and waypoints, not recomputed
        r = run_episode(env, pol, detokenizer, replan=replan)
        out["success"].append(bool(r.success))
        out["calls"].append(r.calls)
        out["tokens"].append(r.tokens)
        out["tokens_never"].append(len(tokenize(r.plans[0])) if r.plans else 0)
        out["expert_steps"].append(demo.n_steps)
        out["train_tokens"].append(r.tokens + 24 * r.calls)  # remaining plans + ~24 prompt tokens per sample
        out["compression"].append(ex.compression(demo.n_steps))
    return out


def learned_policies(bcfg, pre_cfg, ft_cfg, ev_cfg, seed: int = 0, log=None, backend: str = "auto") -> dict:
    """Pre-train (cached), fine-tune each method for the same steps, probe retention, roll out.

    Each method's fine-tuning, probes and rollouts are one task (``_method_task``) that starts from the same
    pre-trained weights, demos and seeds (torch's global generator reseeded, its own synonym generator), so a
    method's result does not depend on which methods ran before it; with ``ev_cfg.workers > 1`` the tasks run
    side by side through ``harness.parallel.map_tasks`` (one torch thread each) with the same result.
    """
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model on a shared 2-core box: one thread is fastest
    try:
        sec = {}
        t0 = time.perf_counter()
        settings = PretrainSettings(pre_cfg.steps, pre_cfg.scenes, pre_cfg.batch,
                                    grounding_weight=pre_cfg.grounding_weight, seed=seed,
                                    robot_views=pre_cfg.robot_views)
        base, vocab0, info = pretrain(bcfg, settings, log=log)
        sec["pretrain"] = time.perf_counter() - t0
        pim, psamples = probe_set(ev_cfg.retention_questions, seed, bcfg.image_size)
        pre = score_probes(base, vocab0, pim, psamples)
        t0 = time.perf_counter()
        records = collect_demos(ft_cfg.demos, seed, bcfg.image_size)
        sec["demos"] = time.perf_counter() - t0
        shared = (bcfg, pre_cfg, ft_cfg, ev_cfg, seed, base.state_dict(), vocab0, records, pim, psamples, pre)
        tasks = [(m,) + shared for m in ft_cfg.methods]
        workers = min(check_scalar(ev_cfg.workers, "workers", int, min=1), len(tasks))
        if workers > 1:
            from neurips26.harness.parallel import map_tasks

            outs = map_tasks(_method_task, tasks, backend=backend, workers=workers, progress=False)
        else:
            outs = [_method_task(t, log) for t in tasks]
        rollouts, detail, example, grounding = {}, {}, "", {}
        for m, o in zip(ft_cfg.methods, outs):
            rollouts[m], detail[m] = o["rollouts"], o["detail"]
            sec.update(o["seconds"])
            if "grounding" in o:
                grounding[m] = o["grounding"]
            if m == "notvla":
                example = o["rollouts"]["id"][0]["plan"]
        return {
            "rollouts": rollouts,
            "retention_detail": detail,
            "probes_pre": pre,
            "example_plan": example,
            "grounding": grounding,
            "steps_used": {
                "pretrain": pre_cfg.steps,
                "finetune": ft_cfg.steps,
                "pretrain_cached": info["cached"],
            },
            "seconds": sec,
            "pretrain_loss": info["final_loss"],
        }
    finally:
        torch.set_num_threads(threads)


def _method_task(task, log=None) -> dict:
    """One method under the matched protocol: fine-tune a copy of the pre-trained backbone, score the
    retention probes, measure first-step grounding (plan writers) and roll out ID / OOD / camera shift."""
    m, bcfg, pre_cfg, ft_cfg, ev_cfg, seed, state, vocab0, records, pim, psamples, pre = task
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(seed)  # new token rows / LoRA adapters draw from the global generator
        sec = {}
        t0 = time.perf_counter()
        vocab = copy.deepcopy(vocab0)
        model = TinyVLM(bcfg, len(vocab0))
        model.load_state_dict(state)
        model.eval()
        acts = np.concatenate([r.demo.actions for r in records])
        n = ev_cfg.episodes
        id_seeds = [900_000 + 1000 * seed + i for i in range(n)]
        ood_seeds = [950_000 + 1000 * seed + i for i in range(n)]
        rng_syn = np.random.default_rng(seed)  # the same synonym rewrites for every method
        half = n // 2

        def synonyms(instr, i):
            return with_synonyms(instr, rng_syn)

        progress, proprio = ft_cfg.progress, ft_cfg.proprio
        out = {}
        if m in NOTVLA_VARIANTS:
            samples, images = notvla_data(records, bcfg.image_size, variant=m, progress=progress, proprio=proprio,
                                          anchor_weight=ft_cfg.anchor_weight)
        else:
            codec = DenseCodec(m, vocab, acts)
            samples, images = dense_data(records, codec, bcfg.image_size, proprio=proprio)
        finetune(model, vocab, samples, images, ft_cfg.steps, batch=pre_cfg.batch, seed=seed, log=log)
        sec[f"finetune_{m}"] = time.perf_counter() - t0
        post = score_probes(model, vocab, pim, psamples)
        out["detail"] = retention(pre, post) | {"post": post}
        t0 = time.perf_counter()
        if m in NOTVLA_VARIANTS:
            pol = NoTVLAPolicy(model, vocab, depth=m != "notvla_no_depth",
                               grammar="xyz" if m == "notvla_no_anchor" else "narrative",
                               progress=progress, proprio=proprio)
            if m != "notvla_no_anchor":
                out["grounding"] = first_step_grounding(pol, id_seeds, bcfg.image_size)
            kw = {
                "image_size": bcfg.image_size,
                "max_calls": ev_cfg.max_calls,
                "max_steps": ev_cfg.max_steps,
                # no-depth ablation: pixel only, depth from the sensor
                "detokenizer": {"notvla": None, "notvla_no_depth": Detokenizer(depth_source="sensor"),
                                "notvla_no_anchor": XYZDetokenizer()}[m],
            }
            r = {
                "id": rollout_notvla(pol, id_seeds, **kw),
                "ood": rollout_notvla(pol, ood_seeds[:half], rewrite=synonyms, **kw)
                + rollout_notvla(pol, ood_seeds[half:], colours=HELD_OUT_COLOURS, **kw),
                "camera_shift": rollout_notvla(pol, id_seeds, shift=CameraShift(azimuth=20.0), **kw),
            }
        else:
            kw = {"image_size": bcfg.image_size, "max_steps": ev_cfg.max_steps, "proprio": proprio}
            r = {
                "id": rollout_dense(model, vocab, codec, id_seeds, **kw),
                "ood": rollout_dense(model, vocab, codec, ood_seeds[:half], rewrite=synonyms, **kw)
                + rollout_dense(model, vocab, codec, ood_seeds[half:], colours=HELD_OUT_COLOURS, **kw),
                "camera_shift": rollout_dense(model, vocab, codec, id_seeds, shift=CameraShift(azimuth=20.0), **kw),
            }
        sec[f"rollout_{m}"] = time.perf_counter() - t0
        out["rollouts"], out["seconds"] = r, sec
        return out
    finally:
        torch.set_num_threads(threads)
