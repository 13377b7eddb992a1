"""Acceptance checks 3 and 4: the second-order expansion of M3 and cosine ascent on quadratics (fp64)."""

import itertools

import numpy as np
import pytest
import torch

from neurips26.nexus import MicroBatch, Nexus


def _quadratics(rng, k, d, spd):
    hs, cs = [], []
    for _ in range(k):
        m = rng.standard_normal((d, d))
        hs.append(torch.tensor(m @ m.T / d + 0.2 * np.eye(d)) if spd == "check4" else
                  torch.tensor(m @ m.T + np.eye(d)))
        cs.append(torch.tensor(rng.standard_normal(d)))
    return hs, cs


def _phi_over_eta(theta0, hs, cs, order, eta, normalize):
    """(theta - phi_K) / eta by the Nexus wrapper itself (rescale off: Delta = (theta - phi) / (eta K))."""
    theta = torch.nn.Parameter(theta0.clone())
    nx = Nexus([theta], outer=torch.optim.SGD([theta], lr=1.0), inner_lr=eta, normalize=normalize,
               rescale=False, log_cos=False)

    def loss(k):
        r = theta - cs[k]
        return 0.5 * r @ hs[k] @ r

    (delta,) = nx.pseudo_gradient([MicroBatch(str(k), k) for k in order], loss)
    return delta * len(order)


def _grad(theta, h, c):
    return h @ (theta - c)


def _formula(theta, hs, cs, order, eta, normalize):
    gs = [_grad(theta, hs[k], cs[k]) for k in order]
    if not normalize:
        out = sum(gs)
        for a in range(len(order)):
            for b in range(a):
                out = out - eta * hs[order[a]] @ gs[b]
        return out
    units = [g / torch.linalg.vector_norm(g) for g in gs]
    out = sum(units)
    eye = torch.eye(len(theta), dtype=theta.dtype)
    for a in range(len(order)):
        u, n = units[a], torch.linalg.vector_norm(gs[a])
        jac = (eye - torch.outer(u, u)) @ hs[order[a]] / n
        for b in range(a):
            out = out - eta * jac @ units[b]
    return out


@pytest.mark.parametrize("normalize", [True, False])
def test_check3_second_order_identity(normalize):
    rng = np.random.default_rng(3)
    hs, cs = _quadratics(rng, 3, 6, "check3")
    theta = torch.tensor(rng.standard_normal(6))
    res = {}
    for eta in (1e-2, 1e-3):
        got = _phi_over_eta(theta, hs, cs, (0, 1, 2), eta, normalize)
        res[eta] = float(torch.linalg.vector_norm(got - _formula(theta, hs, cs, (0, 1, 2), eta, normalize)))
    ratio = res[1e-2] / res[1e-3]
    assert 70 <= ratio <= 130
    if not normalize:  # quadratics: the raw remainder is exactly eta^2-homogeneous for K = 3
        assert abs(ratio - 100) < 1e-6


def test_check3_ordering_average_is_gradient_inner_product_descent():
    rng = np.random.default_rng(4)
    hs, cs = _quadratics(rng, 3, 6, "check3")
    theta = torch.tensor(rng.standard_normal(6))
    gs = [_grad(theta, h, c) for h, c in zip(hs, cs)]
    # grad of sum_{j<k} g_j . g_k = sum_{j<k} (H_j g_k + H_k g_j)
    gip = sum(hs[j] @ gs[k] + hs[k] @ gs[j] for j, k in itertools.combinations(range(3), 2))
    res = {}
    for eta in (1e-2, 1e-3):
        perms = list(itertools.permutations(range(3)))
        avg = sum(_phi_over_eta(theta, hs, cs, p, eta, False) for p in perms) / len(perms)
        res[eta] = float(torch.linalg.vector_norm(avg - (sum(gs) - eta / 2 * gip)))
    assert abs(res[1e-2] / res[1e-3] - 100) < 1e-6


@pytest.mark.parametrize("normalize", [True, False])
def test_check4_cosine_ascent_on_random_quadratic_pairs(normalize):
    rng = np.random.default_rng(2026)
    d, eta, step = 8, 0.05, 0.05
    wins, gains = 0, []
    for _ in range(200):
        hs, cs = _quadratics(rng, 2, d, "check4")
        theta = torch.zeros(d, dtype=torch.float64)
        delta = sum(_phi_over_eta(theta, hs, cs, o, eta, normalize) for o in ((0, 1), (1, 0))) / 2
        gs = [_grad(theta, h, c) for h, c in zip(hs, cs)]
        ref = sum(g / torch.linalg.vector_norm(g) for g in gs) if normalize else sum(gs)

        def cos_after(direction):
            t = theta - step * direction / torch.linalg.vector_norm(direction)
            a, b = _grad(t, hs[0], cs[0]), _grad(t, hs[1], cs[1])
            return float(a @ b / (torch.linalg.vector_norm(a) * torch.linalg.vector_norm(b)))

        c_nexus, c_ref = cos_after(delta), cos_after(ref)
        wins += c_nexus > c_ref
        gains.append(c_nexus - c_ref)
    assert wins >= 180
    assert np.mean(gains) > 0
