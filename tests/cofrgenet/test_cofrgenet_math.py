"""Spec acceptance checks 1-6 and 12: continuants, Fibonacci, Proposition 1, division back-ends."""

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurips26.cofrgenet import DIVISIONS, bounded_reciprocal, cf_exact, cf_nested, cf_positive, cf_signed, \
    continuants, prop1_gradient
from neurips26.cofrgenet.continued_fraction import _ClampCF, signed_ladder

D64 = torch.float64


def t(*xs):
    return torch.tensor(xs, dtype=D64)


# ---------------------------------------------------------------- check 1: identities
def test_continuant_identities():
    a, b, c = 1.7, -0.3, 2.9
    K = continuants(t(a, b))
    assert K.tolist() == pytest.approx([1.0, b, a * b + 1])           # K(a,b) = ab + 1
    K = continuants(t(a, b, c))
    assert K[-1].item() == pytest.approx(a * b * c + a + c)             # K(a,b,c) = abc + a + c
    assert cf_exact(t(a)).item() == pytest.approx(1 / a)
    assert cf_exact(t(a, b)).item() == pytest.approx(b / (a * b + 1))
    assert cf_exact(t(2.0, 3.0)).item() == pytest.approx(3 / 7, abs=1e-15)
    assert cf_nested(t(2.0, 3.0)).item() == pytest.approx(3 / 7, abs=1e-15)


# ---------------------------------------------------------------- check 2: Fibonacci
@pytest.mark.parametrize("d", range(1, 21))
def test_fibonacci_ratio(d):
    fib = [0, 1, 1]
    while len(fib) < d + 2:
        fib.append(fib[-1] + fib[-2])
    a = torch.ones(d, dtype=D64)
    for f in (cf_exact(a), cf_signed(a, division="logspace"), cf_positive(a)):
        assert abs(f.item() - fib[d] / fib[d + 1]) < 1e-12


# ---------------------------------------------------------------- check 3: continuants vs nested
@pytest.mark.parametrize("d", range(1, 11))
def test_continuant_equals_nested_fp64(d):
    g = torch.Generator().manual_seed(d)
    mag = torch.rand(20000, d, generator=g, dtype=D64) * 1.5 + 0.5
    sign = torch.randint(0, 2, (20000, d), generator=g).to(D64) * 2 - 1
    a = mag * sign
    torch.testing.assert_close(cf_exact(a), cf_nested(a), rtol=1e-7, atol=1e-12)


# ---------------------------------------------------------------- check 4: Proposition 1
def _away_from_poles(d, n=64, seed=0, margin=0.5):
    g = torch.Generator().manual_seed(seed)
    a = (torch.rand(4 * n, d, generator=g, dtype=D64) * 1.5 + 0.5) * \
        (torch.randint(0, 2, (4 * n, d), generator=g).to(D64) * 2 - 1)
    keep = continuants(a)[:, -1].abs() > margin
    return a[keep][:n].clone()


@pytest.mark.parametrize("d", [1, 2, 3, 5, 8])
def test_prop1_equals_autograd_of_naive(d):
    a = _away_from_poles(d).requires_grad_(True)
    cf_nested(a).sum().backward()
    torch.testing.assert_close(prop1_gradient(a.detach()), a.grad, rtol=1e-9, atol=1e-12)
    a.grad = None
    cf_signed(a, eps=0.01, division="clamp").sum().backward()           # the custom Function
    g_custom = a.grad.clone()
    a.grad = None
    cf_nested(a).sum().backward()
    torch.testing.assert_close(g_custom, a.grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("d", [1, 2, 4, 5])
def test_prop1_custom_function_gradcheck(d):
    a = _away_from_poles(d, n=8).t().contiguous().requires_grad_(True)   # [d, n] depth-first
    assert torch.autograd.gradcheck(lambda x: _ClampCF.apply(x, 0.01)[0], (a,), eps=1e-6, atol=1e-6)


def test_prop1_differs_from_naive_if_sign_wrong():
    """Sanity: the check above would catch a wrong sign convention ((-1)^(k+1))."""
    a = _away_from_poles(3, n=16)
    wrong = -prop1_gradient(a)
    a.requires_grad_(True)
    cf_nested(a).sum().backward()
    assert not torch.allclose(wrong, a.grad)


def test_clamp_dead_zone_is_prop1_pseudo_gradient():
    """Inside |K_d| < eps the clamp back-end returns the Prop-1 formula at K_d_safe (prior behaviour)."""
    eps = 0.01
    a = t(0.5, 1e-4).reshape(1, 2).requires_grad_(True)                  # K_2 = 0.5e-4 + 1, K_1 = 1e-4
    a2 = t(1e-3).reshape(1, 1).requires_grad_(True)                       # d=1, K_1 = 1e-3 < eps
    cf_signed(a2, eps, "clamp").sum().backward()
    assert a2.grad.item() == pytest.approx(-(1.0 / eps) ** 2)            # (-1)^1 (K_0 / K_d_safe)^2
    cf_signed(a, eps, "clamp").sum().backward()
    assert torch.isfinite(a.grad).all()


# ---------------------------------------------------------------- check 5: back-ends
@pytest.mark.parametrize("division", DIVISIONS)
@pytest.mark.parametrize("d", [1, 2, 3, 5, 8])
def test_backends_equal_exact_division_fp64(division, d):
    g = torch.Generator().manual_seed(10 + d)
    a = (torch.rand(20000, d, generator=g, dtype=D64) * 1.5 + 0.5) * \
        (torch.randint(0, 2, (20000, d), generator=g).to(D64) * 2 - 1)
    eps = 0.01
    keep = continuants(a)[:, -1].abs() >= 10 * eps
    f, ref = cf_signed(a, eps, division)[keep], cf_exact(a)[keep]
    assert ((f - ref).abs() / ref.abs().clamp_min(1e-300)).max().item() < 1e-5


def test_logexp_fp32_agrees_with_naive_fp32_division_of_same_continuants():
    g = torch.Generator().manual_seed(3)
    a = (torch.rand(20000, 5, generator=g) * 1.5 + 0.5) * (torch.randint(0, 2, (20000, 5), generator=g) * 2 - 1)
    K = continuants(a)
    keep = K[:, -1].abs() >= 0.1
    naive = (K[:, -2] / K[:, -1])[keep]
    f = cf_signed(a, 0.01, "logexp")[keep]
    assert ((f - naive).abs() / naive.abs()).max().item() < 1e-5


@pytest.mark.parametrize("division", DIVISIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_backends_finite_at_poles(division, dtype):
    """K_d in {0, +-1e-30, +-eps/2, +-1e30}: with d=1, K_1 = a_1; with d=2, K_2 = a_1 a_2 + 1."""
    eps = 0.01
    for kd in (0.0, 1e-30, -1e-30, eps / 2, -eps / 2, 1e30, -1e30):
        a1 = torch.tensor([[kd]], dtype=dtype, requires_grad=True)
        f = cf_signed(a1, eps, division)
        f.sum().backward()
        assert torch.isfinite(f).all() and torch.isfinite(a1.grad).all(), (division, kd)
        # d = 2 with a_2 = 1: K_2 = a_1 + 1 = kd  -> a_1 = kd - 1
        a2 = torch.tensor([[kd - 1.0, 1.0]], dtype=dtype, requires_grad=True)
        f = cf_signed(a2, eps, division)
        f.sum().backward()
        assert torch.isfinite(f).all() and torch.isfinite(a2.grad).all(), (division, kd)


@pytest.mark.parametrize("division", DIVISIONS)
def test_backends_finite_with_zero_terms(division):
    a = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 2.0], [0.0, 3.0, 0.0], [-1.0, 1.0, 0.0]], requires_grad=True)
    f = cf_signed(a, 0.01, division)
    f.sum().backward()
    assert torch.isfinite(f).all() and torch.isfinite(a.grad).all()


def test_logspace_deep_ladder_does_not_overflow():
    a = torch.full((4, 64), 10.0)
    a[1] = -10.0
    a[2, ::2] = -10.0
    naive = continuants(a)[:, -1]
    assert not torch.isfinite(naive).all()                                # plain continuants overflow fp32
    a.requires_grad_(True)
    f = cf_signed(a, 0.01, "logspace")
    f.sum().backward()
    assert torch.isfinite(f).all() and torch.isfinite(a.grad).all()
    torch.testing.assert_close(f.double(), cf_nested(a.detach().double()), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_ladders_run_in_fp32_for_half_inputs(dtype):
    a = (torch.rand(100, 6) + 0.5).to(dtype)
    f = cf_signed(a, 0.01, "logspace")
    assert f.dtype == dtype and torch.isfinite(f).all()
    f32, _ = signed_ladder(list(a.float().unbind(-1)), 0.01, "logspace")
    torch.testing.assert_close(f.float(), f32.to(dtype).float())


# ---------------------------------------------------------------- check 6: |R| bound (hypothesis)
finite = st.floats(min_value=-1e30, max_value=1e30, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, min_size=1, max_size=64), st.sampled_from(["clamp", "logexp"]),
       st.sampled_from([1e-3, 0.01, 0.1, 1.0]))
def test_reciprocal_bounded(values, division, eps):
    D = torch.tensor(values, dtype=torch.float32, requires_grad=True)
    R = bounded_reciprocal(D, eps, division)
    assert torch.isfinite(R).all()
    assert (R.abs() <= (1 / eps) * (1 + 1e-5)).all()
    R.sum().backward()
    assert torch.isfinite(D.grad).all()


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 12), st.lists(st.floats(-50, 50, allow_nan=False, width=32), min_size=12, max_size=12),
       st.sampled_from(DIVISIONS))
def test_ladder_output_bounded_by_cap(d, values, division):
    """|f| = |K_{d-1}| |R(K_d)| <= |K_{d-1}|/eps (1+1e-5) for every back-end, finite grads."""
    a = torch.tensor(values[:d], dtype=torch.float64).reshape(1, d).requires_grad_(True)
    eps = 0.01
    f = cf_signed(a, eps, division)
    f.sum().backward()
    assert torch.isfinite(f).all() and torch.isfinite(a.grad).all()
    k_prev = continuants(a.detach())[:, -2].abs()
    assert (f.detach().abs() <= k_prev / eps * (1 + 1e-5) + 1e-12).all()


def test_logexp_reciprocal_properties():
    eps = 0.01
    D = torch.tensor([10 * eps, 100 * eps, 1.0, 1e6], dtype=D64)
    R = bounded_reciprocal(D, eps, "logexp")
    assert ((R - 1 / D).abs() / (1 / D)).max().item() <= 1.3e-9          # <= 1.25e-9 at |D| >= 10 eps
    x = torch.logspace(-6, 1, 20001, dtype=D64).requires_grad_(True)
    bounded_reciprocal(x, eps, "logexp").sum().backward()
    assert x.grad.abs().max().item() <= 0.56 / eps ** 2                   # |dR/dD| <= 0.56/eps^2
    assert bounded_reciprocal(torch.tensor([0.0]), eps, "logexp").item() == pytest.approx(1 / eps, rel=1e-5)


# ---------------------------------------------------------------- check 12: positive ladder
@pytest.mark.parametrize("d", [1, 2, 4, 16, 64, 256])
def test_positive_log_ladder_equals_nested(d):
    g = torch.Generator().manual_seed(d)
    a = (torch.rand(500, d, generator=g, dtype=D64) * 19.95 + 0.05).requires_grad_(True)
    f = cf_positive(a)
    ref = cf_nested(a.detach())
    assert ((f.detach() - ref).abs() / ref).max().item() < 1e-6
    f.sum().backward()
    assert torch.isfinite(a.grad).all()


def test_positive_ladder_deep_where_continuants_overflow_fp64():
    a = torch.full((2, 256), 19.9, dtype=D64, requires_grad=True)
    assert not torch.isfinite(continuants(a.detach())[:, -1]).all()      # explicit continuants overflow
    f = cf_positive(a)
    f.sum().backward()
    assert torch.isfinite(f).all() and torch.isfinite(a.grad).all()
    assert f.detach()[0].item() == pytest.approx(cf_nested(a.detach())[0].item(), rel=1e-12)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, exc, word", [
    (dict(eps=0.0), ValueError, "eps"), (dict(eps=-1.0), ValueError, "eps"),
    (dict(eps=float("inf")), ValueError, "eps"), (dict(eps=float("nan")), ValueError, "eps"),
    (dict(division="divide"), ValueError, "division"), (dict(eps="0.1"), TypeError, "eps"),
])
def test_cf_signed_bad_args(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        cf_signed(torch.ones(3, 2), **kwargs)


def test_integer_and_complex_dtypes_rejected():
    with pytest.raises(TypeError, match="a must have a floating dtype"):
        cf_signed(torch.ones(3, 2, dtype=torch.int64))
    with pytest.raises(TypeError, match="a must have a floating dtype"):
        cf_exact(torch.ones(3, 2, dtype=torch.complex64))
    with pytest.raises(TypeError, match="den"):
        bounded_reciprocal(torch.ones(3, dtype=torch.int32))
    with pytest.raises(ValueError, match="a must have the CF depth"):
        cf_signed(torch.ones(3, 0))
    with pytest.raises(ValueError, match="a must be strictly positive"):
        cf_positive(torch.tensor([1.0, -1.0]))
    assert math.isfinite(cf_positive(torch.tensor([1.0, 2.0])).item())
