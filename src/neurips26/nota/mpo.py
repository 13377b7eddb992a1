"""Matrix product operators (MPO / TT-matrix): cores, contraction, input-side apply, TT-SVD.

A weight update ``dW`` of shape ``(d_out, d_in)`` with ``d_out = prod j_k`` and ``d_in = prod i_k`` is
stored as ``n`` cores ``T^(k)`` of shape ``(D_{k-1}, j_k, i_k, D_k)`` with ``D_0 = D_n = 1``::

    dW[(j_1..j_n), (i_1..i_n)]
        = sum_{a} T^(1)[1,j_1,i_1,a_1] T^(2)[a_1,j_2,i_2,a_2] ... T^(n)[a_{n-1},j_n,i_n,1]

Row and column indices are C-order mixed radix (``j_1`` most significant). ``contract`` materialises
``dW`` (optionally with H-NoTA modulation matrices ``M^(k)`` of shape ``(D_k, D_k)`` between cores k and
k+1); ``apply`` computes ``x @ dW.T`` core by core without materialising it.
"""
from __future__ import annotations

import math
from typing import Sequence

import torch

from neurips26.harness.validation import check_scalar


def check_factors(dim: int, factors: Sequence[int], name: str) -> tuple[int, ...]:
    """``factors`` as a tuple of ints >= 1 whose product is ``dim``; ValueError naming ``name`` otherwise."""
    fs = tuple(check_scalar(f, f"{name}[{k}]", int, min=1) for k, f in enumerate(factors))
    if not fs:
        raise ValueError(f"{name} must have at least one factor, got {factors!r}")
    if math.prod(fs) != dim:
        raise ValueError(f"{name}={fs} multiplies to {math.prod(fs)}, not the layer dimension {dim}")
    return fs


def balanced_factors(dim: int, n: int) -> tuple[int, ...]:
    """``n`` factors of ``dim`` (descending) each close to ``dim ** (1/n)``: 64, 3 -> (4, 4, 4); 64, 2 -> (8, 8);
    192, 3 -> (8, 6, 4). Greedy: the divisor nearest the n-th root, then the rest with n - 1 factors."""
    dim = check_scalar(dim, "dim", int, min=1)
    n = check_scalar(n, "n", int, min=1)
    if n == 1:
        return (dim,)
    root = dim ** (1 / n)
    a = min((d for d in range(1, dim + 1) if dim % d == 0), key=lambda d: (abs(d - root), d))
    return tuple(sorted((a,) + balanced_factors(dim // a, n - 1), reverse=True))


def bond_dims(out_factors: Sequence[int], in_factors: Sequence[int], bond: int) -> list[int]:
    """``[1, D_1, ..., D_{n-1}, 1]``: ``bond`` clipped to the maximal useful rank at every cut.

    The useful rank at cut k is ``min(prod_{l<=k} i_l j_l, prod_{l>k} i_l j_l)``.
    """
    if len(out_factors) != len(in_factors):
        raise ValueError(f"out_factors {tuple(out_factors)} and in_factors {tuple(in_factors)} must have the "
                         f"same number n of factors")
    bond = check_scalar(bond, "bond", int, min=1)
    sizes = [j * i for j, i in zip(out_factors, in_factors)]
    n = len(sizes)
    return [1] + [min(bond, math.prod(sizes[:k]), math.prod(sizes[k:])) for k in range(1, n)] + [1]


def n_params(out_factors: Sequence[int], in_factors: Sequence[int], bond: int) -> int:
    """``P_MPO = sum_k D_{k-1} j_k i_k D_k`` with the clipped bonds."""
    d = bond_dims(out_factors, in_factors, bond)
    return sum(d[k] * j * i * d[k + 1] for k, (j, i) in enumerate(zip(out_factors, in_factors)))


def _check_cores(cores: Sequence[torch.Tensor]) -> None:
    if not cores:
        raise ValueError("cores must hold at least one core")
    for k, c in enumerate(cores):
        if c.ndim != 4:
            raise ValueError(f"cores[{k}] must be 4-D (D_prev, j, i, D_next), got shape {tuple(c.shape)}")
        if k and cores[k - 1].shape[3] != c.shape[0]:
            raise ValueError(f"bond mismatch between cores[{k - 1}] {tuple(cores[k - 1].shape)} and "
                             f"cores[{k}] {tuple(c.shape)}")
    if cores[0].shape[0] != 1 or cores[-1].shape[3] != 1:
        raise ValueError("the first core's left bond and the last core's right bond must be 1")


def contract(cores: Sequence[torch.Tensor], mods: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
    """Materialise ``dW`` (d_out, d_in) from the cores; ``mods[k]`` (D_{k+1} x D_{k+1}) sits after core k."""
    _check_cores(cores)
    n = len(cores)
    if mods is not None and len(mods) != n - 1:
        raise ValueError(f"mods must hold n-1 = {n - 1} modulation matrices, got {len(mods)}")
    r = cores[0][0]                                   # (j1, i1, D1)
    for k in range(1, n):
        if mods is not None:
            r = r @ mods[k - 1]
        r = torch.tensordot(r, cores[k], dims=([-1], [0]))   # (..., j_k, i_k, D_k)
    r = r[..., 0]                                     # (j1, i1, ..., jn, in)
    perm = list(range(0, 2 * n, 2)) + list(range(1, 2 * n, 2))
    d_out = math.prod(c.shape[1] for c in cores)
    d_in = math.prod(c.shape[2] for c in cores)
    return r.permute(perm).reshape(d_out, d_in)


def apply(cores: Sequence[torch.Tensor], x: torch.Tensor,
          mods: Sequence[torch.Tensor] | None = None) -> torch.Tensor:
    """``x @ contract(cores, mods).T`` for ``x`` of shape (..., d_in), never materialising ``dW``."""
    _check_cores(cores)
    in_f = [c.shape[2] for c in cores]
    d_in = math.prod(in_f)
    if x.shape[-1] != d_in:
        raise ValueError(f"x has last dimension {x.shape[-1]}, the MPO expects d_in = {d_in}")
    lead = x.shape[:-1]
    b = int(math.prod(lead))
    z = x.reshape(b, 1, in_f[0], d_in // in_f[0], 1)      # (B, J, i_k, I_rest, D_{k-1})
    for k, c in enumerate(cores):
        if k and mods is not None:
            z = z @ mods[k - 1]
        z = torch.einsum("bJiRa,ajic->bJjRc", z, c)          # (B, J, j_k, I_rest, D_k)
        bj = z.shape[1] * z.shape[2]
        if k + 1 < len(cores):
            nxt = in_f[k + 1]
            z = z.reshape(b, bj, nxt, z.shape[3] // nxt, z.shape[4])
        else:
            z = z.reshape(b, bj)
    return z.reshape(*lead, -1)


def flops_contract(cores: Sequence[torch.Tensor]) -> int:
    """Multiply-adds of ``contract`` (the running product times each next core)."""
    total, size = 0, cores[0].shape[1] * cores[0].shape[2]
    for c in cores[1:]:
        total += size * c.shape[0] * c.shape[1] * c.shape[2] * c.shape[3]
        size *= c.shape[1] * c.shape[2]
    return total


def flops_apply(cores: Sequence[torch.Tensor], batch: int) -> int:
    """Multiply-adds of ``apply`` on ``batch`` rows."""
    d_in = math.prod(c.shape[2] for c in cores)
    total, jsz, rest = 0, 1, d_in
    for c in cores:
        rest //= c.shape[2]
        total += batch * jsz * rest * c.shape[0] * c.shape[1] * c.shape[2] * c.shape[3]
        jsz *= c.shape[1]
    return total


def tt_svd(w: torch.Tensor, out_factors: Sequence[int], in_factors: Sequence[int],
           bond: int) -> list[torch.Tensor]:
    """Cores of the MPO of ``w`` by sequential truncated SVD (TT-SVD) with bonds ``bond_dims(...)``.

    With full bonds the reconstruction is exact; the error is non-increasing in ``bond``.
    """
    if w.ndim != 2:
        raise ValueError(f"w must be a matrix, got shape {tuple(w.shape)}")
    jf = check_factors(w.shape[0], out_factors, "out_factors")
    if_ = check_factors(w.shape[1], in_factors, "in_factors")
    dims = bond_dims(jf, if_, bond)
    n = len(jf)
    t = w.reshape(*jf, *if_)
    t = t.permute([p for k in range(n) for p in (k, n + k)])   # (j1, i1, j2, i2, ...)
    cores, left = [], 1
    rest = t.reshape(-1)
    for k in range(n - 1):
        m = rest.reshape(left * jf[k] * if_[k], -1)
        u, s, vh = torch.linalg.svd(m, full_matrices=False)
        r = min(dims[k + 1], s.shape[0])
        cores.append(u[:, :r].reshape(left, jf[k], if_[k], r))
        rest = s[:r, None] * vh[:r]
        left = r
    cores.append(rest.reshape(left, jf[-1], if_[-1], 1))
    return cores
