"""tinylm data parallel: W gloo ranks (each sampling, scoring and training on its slice of the groups)
reproduce the one-process SFT and RL run; the same code under torchrun."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from neurips26.harness.distributed import launch_local  # noqa: E402
from neurips26.rlvr_noise.bandit import BanditPolicy, problem_index  # noqa: E402
from neurips26.rlvr_noise.mathgen import make_problems  # noqa: E402
from neurips26.rlvr_noise.objectives import VARIANTS  # noqa: E402
from neurips26.rlvr_noise.tinylm import (TinyLMConfig, build_model, dp_world, encode_prompts, generate,  # noqa: E402
                                         rank_slice, sft, train_rl)

# B = 5 groups: 3 + 2 over two ranks, one mini-batch (both ranks in every Adam step), 2 PPO epochs;
# DAPO covers dynamic sampling (several rounds), overlong shaping and the token mean; PGBC the globally
# measured rho0; Dr. GRPO the 1/(G L_max) sum
VARIANT_NAMES = ("grpo", "dapo", "dr_grpo", "pgbc")


def _cfg(dp: bool) -> TinyLMConfig:
    return TinyLMConfig(steps=3, batch=5, group=4, minibatches=1, ppo_epochs=2, sft_epochs=6, sft_samples=4,
                        sft_batch=7, lr=3e-3, device="cpu", data_parallel=dp)


def _flat(m) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in m.parameters()])


def _train_all(dp: bool) -> dict:
    """SFT (data parallel when ``dp``), then format-reward RL with each variant from one plain-SFT base (so
    that the RL comparison starts from identical weights)."""
    import dataclasses

    torch.set_num_threads(1)
    cfg = _cfg(dp)
    data = make_problems(10, 1, seed=4)
    prior = BanditPolicy(seed=0)
    f, b = problem_index(data.train)
    args = (data.train, prior.skill_probs(f, b), prior.format_probs())
    init = _flat(build_model(cfg, seed=0))
    m = build_model(cfg, seed=0)
    out = {"world": dp_world(cfg)[1], "init": init, "sft": sft(m, *args, cfg, seed=0), "sft_params": _flat(m)}
    base = build_model(cfg, seed=0)
    sft(base, *args, dataclasses.replace(cfg, data_parallel=False), seed=0)
    out["base"] = _flat(base)
    for v in VARIANT_NAMES:
        m = build_model(cfg, seed=1)
        m.load_state_dict(base.state_dict())
        curves = train_rl(m, data.train, None, VARIANTS[v], cfg, seed=2)   # format reward: signal at once
        out[v] = {"curves": curves, "params": _flat(m)}
    return out


def _rank_job() -> dict:
    return _train_all(True)


def _close(got, ref, start, tol=2e-3) -> float:
    """|got - ref| relative to how far training moved the weights from ``start`` (measured 5e-5 to 5e-4:
    Adam turns float-order noise in near-zero gradient entries into ~lr steps; a wrong loss share would be
    off by tens of percent, and the sampled tokens of the later steps would then differ)."""
    rel = float((got - ref).norm() / (ref - start).norm())
    assert rel < tol, rel
    return rel


def _compare(ref: dict, got: dict) -> None:
    assert np.allclose(got["sft"], ref["sft"], rtol=1e-5)
    _close(got["sft_params"], ref["sft_params"], ref["init"])
    assert torch.equal(got["base"], ref["base"])
    for v in VARIANT_NAMES:
        r, g = ref[v], got[v]
        # the same samples (rewards, lengths, kept groups are functions of them) ...
        for k in ("reward", "length", "kept_groups"):
            assert g["curves"][k] == pytest.approx(r["curves"][k], abs=1e-9), (v, k)
        assert g["curves"]["entropy"] == pytest.approx(r["curves"]["entropy"], rel=1e-5), v
        # ... and the same Adam steps, up to float summation order
        _close(g["params"], r["params"], ref["base"])


def test_rank_slice_and_lone_process():
    assert [rank_slice(5, k, 2) for k in range(2)] == [(0, 3), (3, 5)]
    assert [rank_slice(2, k, 3) for k in range(3)] == [(0, 1), (1, 2), (2, 2)]
    assert dp_world(_cfg(True)) == (0, 1)          # no process group, no torchrun: one rank
    with pytest.raises(TypeError, match="data_parallel"):
        TinyLMConfig(data_parallel="yes")


def test_sliced_sampling_equals_the_global_batch():
    """A row's tokens depend only on its own uniforms: sampling a slice with the slice of the uniforms
    gives the slice of the whole batch's samples (what lets each rank sample its own groups)."""
    torch.set_num_threads(1)
    cfg = _cfg(False)
    m = build_model(cfg, seed=3)
    pr = encode_prompts(make_problems(6, 1, seed=1).train).repeat_interleave(3, 0)
    u = torch.from_numpy(np.random.default_rng(0).random((len(pr), cfg.l_max), dtype=np.float32))
    tok, mask, mu = generate(m, pr, cfg.l_max, uniforms=u)
    t2, m2, mu2 = generate(m, pr[7:13], cfg.l_max, uniforms=u[7:13])
    w = t2.shape[1]
    assert torch.equal(tok[7:13, :w], t2) and torch.equal(mask[7:13, :w], m2) and not mask[7:13, w:].any()
    assert torch.allclose(mu[7:13, :w] * m2, mu2 * m2, atol=1e-6)
    with pytest.raises(ValueError, match="uniforms"):
        generate(m, pr, cfg.l_max, uniforms=u[:3])


def test_two_gloo_ranks_equal_one_process():
    ref = _train_all(False)
    assert ref["world"] == 1
    out = launch_local(_rank_job, world=2, start_method="fork", timeout=300)
    assert [o["world"] for o in out] == [2, 2]
    for got in out:                                # every rank holds the same trained weights
        _compare(ref, got)


TORCHRUN_SCRIPT = textwrap.dedent("""
    import sys, torch
    sys.path[:0] = [{tests!r}]
    import torch.distributed as dist
    from test_rlvr_noise_ddp import _train_all
    out = _train_all(True)                         # dp_world initialises the group from env:// itself
    if dist.get_rank() == 0:
        torch.save(out, {out!r})
    dist.destroy_process_group()
""")


@pytest.mark.slow
def test_torchrun_two_ranks_equal_one_process(tmp_path):
    import os
    from pathlib import Path

    script = tmp_path / "job.py"
    result = tmp_path / "rank0.pt"
    script.write_text(TORCHRUN_SCRIPT.format(tests=str(Path(__file__).parent), out=str(result)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                    str(script)], check=True, env=env, timeout=300, capture_output=True)
    got = torch.load(result, weights_only=False)
    assert got["world"] == 2
    _compare(_train_all(False), got)
