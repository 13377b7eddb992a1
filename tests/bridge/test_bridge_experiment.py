"""Claim logic of the reproduction on synthetic metrics, and one real smoke-sized case."""

import math

import numpy as np
import pytest

from neurips26.bridge.sweep import DiscreteCase, GaussianCase, run_case
from neurips26.harness.paper import FAILS, HOLDS, INCONCLUSIVE
from neurips26.harness.registry import load

exp = load("bridge", "experiment")


def curve(values, window=None, se=None, a=None, slope=2.0):
    n = len(values)
    return {
        "kl": list(values),
        "kl_norm": list(values),
        "tv_norm": list(values),
        "tv_norm_2se": list(se if se is not None else [0.0] * n),
        "a": list(a if a is not None else values),
        "window": list(range(n)) if window is None else window,
        "slope": slope,
    }


def test_bounded_rule_tau_and_n_parts():
    ok = exp.bounded_rule({2: curve([1.0, 0.5, 0.8]), 8: curve([1.5, 1.0, 1.2])}, "kl_norm")
    assert all(t["verdict"] == HOLDS for t in ok["tau"].values()) and ok["N"]["verdict"] == HOLDS
    up = exp.bounded_rule({2: curve([1.0, 1.5, 2.5])}, "kl_norm")
    assert up["tau"][2]["verdict"] == FAILS and up["tau"][2]["ratio"] == pytest.approx(2.5)
    grow = exp.bounded_rule({2: curve([1.0, 1.0]), 16: curve([3.0, 3.0])}, "kl_norm")
    assert grow["N"]["verdict"] == FAILS and grow["N"]["ratio"] == pytest.approx(3.0)


def test_bounded_rule_is_noise_aware():
    """A violation inside 2 s.e. of the Monte Carlo TV is inconclusive, not a failure."""
    noisy = exp.bounded_rule({4: curve([1.0, 2.1], se=[0.2, 0.2])}, "tv_norm", "tv_norm_2se", n_part=False)
    assert noisy["tau"][4]["verdict"] == INCONCLUSIVE
    clear = exp.bounded_rule({4: curve([1.0, 3.0], se=[0.01, 0.01])}, "tv_norm", "tv_norm_2se", n_part=False)
    assert clear["tau"][4]["verdict"] == FAILS


def _metrics(rates, tight=None, control=None):
    return {"rates": rates, "tightness": tight or {}, "control": control or {}}


def _rate(sur="S1", kl=HOLDS, tv=HOLDS, a=HOLDS, ratio=1.0, slope=(2.1, 2.4)):
    return {
        "family": "gaussian",
        "surrogate": sur,
        "no_window": False,
        "kl_verdict": kl,
        "tv_verdict": tv,
        "a_verdict": a,
        "kl_tau_max_ratio": ratio,
        "kl_N_ratio": 1.0,
        "tv_tau_max_ratio": ratio,
        "a_tau_max_ratio": ratio,
        "slope_min": slope[0],
        "slope_max": slope[1],
    }


def test_rate_claims_combine_settings():
    claims = {c.id: c for c in exp.CLAIMS}
    good = _metrics({"a": _rate(), "b": _rate("S3"), "c": _rate("S2", kl=FAILS)})  # S2 is not in the claim
    assert claims["kl_rate"].evaluate(good).verdict == HOLDS
    bad = _metrics({"a": _rate(), "b": _rate("S3", kl=FAILS, ratio=3.0)})
    assert claims["kl_rate"].evaluate(bad).verdict == FAILS
    none = _metrics({"a": {"family": "gaussian", "surrogate": "S1", "no_window": True}})
    assert claims["kl_rate"].evaluate(none).verdict == INCONCLUSIVE
    assert claims["exponent"].evaluate(_metrics({"a": _rate(slope=(1.5, 2.0))})).verdict == FAILS
    assert claims["exponent"].evaluate(good).verdict == HOLDS


def test_tightness_and_control_claims():
    claims = {c.id: c for c in exp.CLAIMS}
    tight = {
        "S3 ell=0.5 T=grid lam=-": {
            "kinked": {"slope_min": 2.2, "slope_max": 2.4},
            "smooth": {"slope_min": 3.1, "slope_max": 3.3},
        }
    }
    assert claims["tight_kinked"].evaluate(_metrics({}, tight)).verdict == HOLDS
    loose = {
        "S3": {"kinked": {"slope_min": 2.2, "slope_max": 2.4}, "smooth": {"slope_min": 2.5, "slope_max": 2.6}}
    }
    assert claims["tight_kinked"].evaluate(_metrics({}, loose)).verdict == FAILS
    assert claims["tight_kinked"].evaluate(_metrics({})).verdict == INCONCLUSIVE
    ctl = {
        "x": {"N": 4, "D": 4, "rho_z": 0.5, "T": 18, "kl_last": 0.26, "plateau_ratio": 1.2, "a_growth": 100.0}
    }
    assert claims["s2_control"].evaluate(_metrics({}, control=ctl)).verdict == HOLDS
    ctl["x"]["plateau_ratio"] = 0.01
    assert claims["s2_control"].evaluate(_metrics({}, control=ctl)).verdict == FAILS


def test_real_cases_have_the_reviewed_shapes():
    g = run_case(GaussianCase(4, 0.5, 18, tv_samples=2000))
    s1, s2 = g["surrogates"]["S1"], g["surrogates"]["S2"]
    assert g["ipf_residual"] < 1e-10
    assert len(s1["window"]) == 6 and 2.0 <= s1["slope"] <= 2.4  # spec: 2.1-2.2 at N >= 4
    assert s2["kl"][-1] == pytest.approx(0.26, abs=0.01)
    assert all(math.isnan(x) for i, x in enumerate(s1["tv"]) if i not in s1["window"])
    tv = np.array(s1["tv"])[s1["window"]]
    pins = np.array(s1["pinsker"])[s1["window"]]
    assert np.all(tv <= pins + np.array(s1["tv_2se"])[s1["window"]])
    d = run_case(DiscreteCase(2, "kinked", 64, G=64, surrogates=("S3",)))
    assert d["sinkhorn_residual"] < 1e-12 and 1.7 <= d["S3_grid"]["slope"] <= 2.7
    assert d["S3_grid"]["tv_2se"][0] == 0.0  # N = 2, G = 64: exact enumeration
