"""Acceptance checks 4-5: codec round trips and parse errors; detokenizer determinism, knots, velocities."""

import hashlib
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.notvla.camera import Camera
from neurips26.notvla.detokenizer import Detokenizer
from neurips26.notvla.errors import DepthUnavailableError, PlanParseError
from neurips26.notvla.plan import (COLOUR_WORDS, SHAPE_WORDS, VERBS, Step, allowed_next, format_plan,
                                   is_complete, parse_plan, tokenize)

EXAMPLE = ("approach the red cube at (41, 57) depth 0 . 62 height 8 ; "
           "grasp the red cube at (41, 57) depth 0 . 62 height 1 close ; lift height 10 ; "
           "move to the blue bowl at (70, 33) depth 0 . 58 height 10 ; "
           "place in the blue bowl at (70, 33) depth 0 . 58 height 4 open ; retreat height 12 .")

steps_st = st.builds(
    lambda verb, anch, c, s, u, v, d, h, ev: Step(verb, h, c if anch else None, s if anch else None,
                                                  u if anch else None, v if anch else None,
                                                  d if anch else None, ev),
    st.sampled_from(VERBS), st.booleans(), st.sampled_from(COLOUR_WORDS), st.sampled_from(SHAPE_WORDS),
    st.integers(0, 99), st.integers(0, 99), st.integers(1, 999), st.integers(0, 100),
    st.sampled_from([None, "close", "open"]))


@given(st.lists(steps_st, min_size=1, max_size=8))
@settings(max_examples=150, deadline=None)
def test_round_trips(steps):
    text = format_plan(steps)
    assert parse_plan(text) == steps
    assert format_plan(parse_plan(text)) == text


@given(st.lists(steps_st, min_size=1, max_size=4))
@settings(max_examples=40, deadline=None)
def test_mask_accepts_every_prefix_of_a_valid_plan(steps):
    toks = tokenize(format_plan(steps))
    vocab = sorted(set(toks) | {"banana", "07", "101"})
    for i, t in enumerate(toks):
        assert allowed_next(toks[:i], vocab)[vocab.index(t)]
        assert not allowed_next(toks[:i], vocab)[vocab.index("banana")]
    assert is_complete(toks) and not any(allowed_next(toks, vocab))


def test_example_and_errors_name_the_token():
    assert format_plan(parse_plan(EXAMPLE)) == EXAMPLE and len(tokenize(EXAMPLE)) == 80
    cases = {"approach the pink cube at (1, 2) depth 0 . 5 height 1 .": 2,
             "lift height 07 .": 2, "lift height 10 . lift": 4, "lift height 10": 3,
             "approach the red cube at (100, 2) depth 0 . 5 height 1 .": 6, "lift height 1 # .": 3,
             "approach the red sphere at (1, 2) depth 0 . 5 height 1 .": 3}
    for text, pos in cases.items():
        with pytest.raises(PlanParseError) as e:
            parse_plan(text)
        assert e.value.position == pos, (text, e.value)


def _motion(text=EXAMPLE, **kw):
    return Detokenizer(depth_source="predicted", **kw)(text, Camera(64), np.array([0.35, 0.0, 0.25]))


def test_knots_zero_velocity_step_bound_and_gripper_timing():
    m = _motion()
    wp = m.waypoints.positions
    assert np.abs(m.positions[m.knot_steps] - wp).max() < 1e-9
    step = np.linalg.norm(m.actions[:, :3], axis=1)
    assert step.max() <= 0.02
    steps = parse_plan(EXAMPLE)
    ev_knots = [k for k, s in zip(m.knot_steps, steps) if s.event]
    for k in ev_knots:  # zero velocity: still on arrival (the dwell) and the spline's derivative ~ 0
        assert np.allclose(m.positions[k:k + 4], m.positions[k], atol=1e-12)
    toggles = np.flatnonzero(np.diff(m.actions[:, 3])) + 1
    assert list(toggles) == m.switch_steps
    for t, k in zip(toggles, ev_knots):
        assert t == k + 3 and np.allclose(m.positions[t], m.positions[k])
    k0 = m.knot_steps[0]   # starts from rest: a cubic with zero end slopes moves 3/n - 2/n^2 of its mean
    mean = np.linalg.norm(m.positions[k0] - m.positions[0]) / k0
    assert np.linalg.norm(m.positions[1] - m.positions[0]) < (3 / k0) * mean * k0 / k0 + 1e-12


def test_linear_detokenizer_is_piecewise_straight():
    m = _motion(interp="linear")
    k0 = m.knot_steps[0]
    seg = m.positions[:k0 + 1]
    d = np.diff(seg, axis=0)
    assert np.allclose(d, d[0])


_HASH = ("import hashlib, numpy as np\nfrom neurips26.notvla.detokenizer import Detokenizer\n"
         "from neurips26.notvla.camera import Camera\n"
         "m = Detokenizer(depth_source='predicted')({!r}, Camera(64), np.array([0.35, 0.0, 0.25]))\n"
         "print(hashlib.sha256(m.actions.tobytes()).hexdigest())")


def test_bitwise_reproducible_across_processes():
    ours = hashlib.sha256(_motion().actions.tobytes()).hexdigest()
    out = subprocess.run([sys.executable, "-c", _HASH.format(EXAMPLE)], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == ours and _motion().actions.dtype == np.float64


def test_depth_sources_and_bad_depth():
    cam = Camera(64)
    P = np.array([0.45, 0.05, 0.04])
    uv, z = cam.project(P)
    U, V = cam.to_grid(uv)
    step = Step("approach", 0, "red", "cube", U, V, int(round(z * 100)))
    depth = np.full((64, 64), z)
    for src in ("predicted", "sensor", "fused"):
        wp = Detokenizer(depth_source=src).ground([step], cam, np.zeros(3), depth).positions[0]
        assert np.linalg.norm(wp - P) < 0.01
    holes = depth.copy()
    j, i = (cam.from_grid(U, V)).astype(int)
    holes[i - 1:i + 2, j - 1:j + 2] = 0.0
    with pytest.raises(DepthUnavailableError):
        Detokenizer(depth_source="sensor").ground([step], cam, np.zeros(3), holes)
    holes[i, j] = np.nan
    with pytest.raises(DepthUnavailableError):
        Detokenizer(depth_source="sensor").ground([step], cam, np.zeros(3), holes)
    # fused falls back to the prediction when the sensor has nothing
    wp = Detokenizer(depth_source="fused").ground([step], cam, np.zeros(3), holes).positions[0]
    assert np.linalg.norm(wp - P) < 0.01
    with pytest.raises(ValueError, match="depth must be > 0"):
        Detokenizer(depth_source="predicted").ground([Step("approach", 0, "red", "cube", U, V, 0)], cam,
                                                      np.zeros(3))
    with pytest.raises(ValueError, match="U"):
        Detokenizer().ground([Step("approach", 0, "red", "cube", 120, V, 50)], cam, np.zeros(3), depth)
    with pytest.raises(ValueError, match="depth_source"):
        Detokenizer(depth_source="lidar")


def test_incremental_policy_mask_equals_allowed_next():
    """The memoised per-state mask of NoTVLAPolicy equals allowed_next of the whole prefix at every token."""
    import torch

    from neurips26.notvla.backbone import BackboneConfig, TinyVLM, Vocab
    from neurips26.notvla.finetune import NoTVLAPolicy
    from neurips26.notvla.plan import Step, allowed_next, format_plan, tokenize

    vocab = Vocab()
    pol = NoTVLAPolicy(TinyVLM(BackboneConfig(d_model=16, layers=1, heads=2), len(vocab)), vocab)
    plan = [Step("approach", 10, "red", "cube", 41, 57, 62), Step("grasp", 2, event="close"),
            Step("move to", 12, "blue", "bowl", 3, 99, 105), Step("release", 4, event="open")]
    toks = tokenize(format_plan(plan))
    ids = vocab.encode(toks)
    for k in range(len(ids) + 1):
        want = allowed_next(toks[:k], vocab.words)
        if not any(want):
            want = [w == "<eos>" for w in vocab.words]
        assert torch.equal(pol._mask(ids[:k]), torch.tensor(want)), k
    assert pol._mask(ids + [vocab.index["<eos>"]]) is None
    assert torch.equal(pol._mask(ids[:3], row=1), torch.tensor(allowed_next(toks[:3], vocab.words)))


def test_no_depth_grammar_and_sensor_fill():
    """The no-depth ablation: plans without depth slots follow the depth=False automaton, and filling
    each anchor's depth from the sensor gives a canonical plan near the oracle's analytic depths."""
    from neurips26.notvla.execution import OraclePolicy, Query
    from neurips26.notvla.finetune import _fill_sensor_depth, _join
    from neurips26.notvla.plan import advance_state, parse_plan, strip_depth, tokenize
    from neurips26.notvla.sim import TabletopSim

    env = TabletopSim(64)
    env.reset(seed=2, options={"template": "bowl"})
    o = env.observe()
    text = OraclePolicy(seed=2).reset(env)(Query(o["rgb"], o["depth"], False, env.instruction(), 0))
    toks = strip_depth(tokenize(text))
    assert "depth" not in toks and len(toks) < len(tokenize(text))
    state = "verb"
    for t in toks:
        state = advance_state(state, t, depth=False)
    assert state == "end"
    filled = parse_plan(_join(_fill_sensor_depth(toks, o["depth"].astype(float))))
    ref = parse_plan(text)
    assert [(s.verb, s.u, s.v, s.height) for s in filled] == [(s.verb, s.u, s.v, s.height) for s in ref]
    for a, b in zip(filled, ref):
        if b.anchored:
            assert abs(a.depth - b.depth) < 0.05


def test_no_anchor_text_round_trip_and_oracle_execution():
    """The no-anchor ablation: absolute x y z text round-trips, rejects malformed text with the token
    index, and the oracle's plans rewritten as absolute positions still solve the tasks through
    XYZDetokenizer (its interface upper bound)."""
    import numpy as np
    import pytest

    from neurips26.notvla.errors import PlanParseError
    from neurips26.notvla.execution import OraclePolicy, run_episode
    from neurips26.notvla.noanchor import XYZDetokenizer, XYZStep, format_xyz, parse_xyz, to_xyz
    from neurips26.notvla.plan import parse_plan
    from neurips26.notvla.sim import TabletopSim

    steps = [XYZStep("approach", 45, -3, 8), XYZStep("grasp", 45, -3, 3, "close"), XYZStep("move to", 50, 12, 10)]
    text = format_xyz(steps)
    assert text == "approach x 45 y - 3 z 8 ; grasp x 45 y - 3 z 3 close ; move to x 50 y 12 z 10 ."
    assert parse_xyz(text) == steps and format_xyz(parse_xyz(text)) == text
    with pytest.raises(PlanParseError) as e:
        parse_xyz("approach x 45 z 8 .")
    assert e.value.position == 3  # approach(0) x(1) 45(2) z(3): "y" expected
    env = TabletopSim(64)
    for s, template in enumerate(("pick", "bowl", "plate", "stack")):
        env.reset(seed=s, options={"template": template})
        oracle = OraclePolicy(seed=s).reset(env)

        def policy(q, oracle=oracle):
            k = min(q.steps_done, len(oracle.plan) - 1)
            z = oracle.anchor_z[k - 1] if k >= 1 else None
            return format_xyz(to_xyz(parse_plan(oracle(q)), env.camera, env.ee, z))

        r = run_episode(env, policy, XYZDetokenizer())
        assert r.success, (template, r.plans[0])
        assert np.all(np.isfinite(env.ee))
