"""The streaming repulsion allocator ``GapAllocator`` (spec §3) and its exact audit.

Energy over the candidate batch X (neighbours gathered from the real gallery R, the accepted
virtuals V and the batch itself; only k nearest neighbours count):

    E = sum_i [ sum_{j in NN_R} phi(<x_i,c_j>) + beta sum_{l in NN_V u NN_B} phi(<x_i,v_l>) ]
        + gamma sum_i psi(x_i)
    phi(c) = T softplus((c - tau_m)/T)   (hinge, default) | (2 - 2c)^(-s/2) (riesz) | exp(kappa (c - 1)) (vmf)
    psi(x) = relu(mahal2(x) - m_max)^2

Update: ``g = grad - <grad, x> x``, ``x <- normalize(P P^T (x - eta g))`` (eta x0.9 every 10 iterations).
Accepted vectors are only re-checked exactly (never moved again).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from neurips26.bip.gallery import Subspace, VirtualIndex, as_unit, check_unit, faiss_index, knn, maxcos
from neurips26.harness.validation import check_choice, check_scalar

KERNELS = ("hinge", "riesz", "vmf")
SEARCHES = ("torch", "flat", "ivf", "hnsw")


def kernel(c: torch.Tensor, tau_m: float, kind: str = "hinge", T: float = 0.02, s: float = 1.0,
           kappa: float = 10.0) -> torch.Tensor:
    """The pair energy phi(cos)."""
    if kind == "hinge":
        return T * F.softplus((c - tau_m) / T)
    if kind == "riesz":
        return (2 - 2 * c).clamp_min(1e-8) ** (-s / 2)
    return torch.exp(kappa * (c - 1))


def riemannian_step(x: torch.Tensor, grad: torch.Tensor, P: torch.Tensor, eta: float) -> torch.Tensor:
    """One step on the sphere restricted to span(P): tangent projection, step, P P^T, normalise."""
    g = grad - (grad * x).sum(1, keepdim=True) * x
    y = ((x - eta * g) @ P) @ P.T
    return y / y.norm(dim=1, keepdim=True).clamp_min(1e-12)


def exact_energy(V: torch.Tensor, R: torch.Tensor, tau_m: float, beta: float = 1.0, T: float = 0.02,
                 kind: str = "hinge", sub: Subspace | None = None, gamma: float = 1.0) -> torch.Tensor:
    """The untruncated energy: every virtual-real pair and every virtual-virtual pair once."""
    e = kernel(V @ R.T, tau_m, kind, T).sum()
    n = V.shape[0]
    iu = torch.triu_indices(n, n, offset=1)
    e = e + beta * kernel((V @ V.T)[iu[0], iu[1]], tau_m, kind, T).sum()
    if sub is not None:
        e = e + gamma * F.relu(sub.mahal2(V) - sub.m_max).pow(2).sum()
    return e


@dataclass
class BatchLog:
    size: int
    first_pass: int            # accepted on the first optimisation pass
    accepted: int              # accepted after the re-seed retries
    seconds: float

    @property
    def acceptance(self) -> float:
        return self.first_pass / self.size


@dataclass
class Audit:
    n_virtual: int
    real_collisions: int            # virtuals with maxcos(v, R) >= tau_c (exact)
    virtual_collisions: int         # virtual pairs with cos >= tau_c (range_search or brute force)
    subset_virtual_collisions: int  # brute-force pairs within a random subset
    subset_size: int
    max_residual: float
    outside_containment: int
    maxcos_real: np.ndarray = field(repr=False)


class GapAllocator:
    """Allocate virtual identities in the gaps of a real gallery, in streaming batches.

    reals: (N, D) unit centers. tau_c: collision threshold; tau_m: allocation threshold (< tau_c).
    subspace: the realizable ``Subspace`` (built from reals with k_0.99 when None).
    search: ``torch`` (exact brute force) or a faiss index over R (``flat``/``ivf``/``hnsw``); the
    accepted virtuals are searched with the same method family (flat for faiss), in one index or, with
    ``virtual_shards`` > 1, sharded (``VirtualIndex``: faiss ``IndexShards``; the audit's range search too).
    """

    def __init__(self, reals, tau_c: float, tau_m: float, subspace: Subspace | None = None,
                 k_real: int = 8, k_virtual: int = 8, k_batch: int = 8, n_iter: int = 20, eta: float = 0.5,
                 batch: int = 10_000, kernel: str = "hinge", T: float = 0.02, beta: float = 1.0,
                 gamma: float = 1.0, max_retries: int = 3, floor: float = 0.5, residual_tol: float = 1e-6,
                 search: str = "torch", nprobe: int = 64, containment: bool = True, seed: int = 0,
                 virtual_shards: int = 1):
        self.R = as_unit(reals, "reals")
        self.tau_c = check_scalar(tau_c, "tau_c", float, min=-1, max=1)
        self.tau_m = check_scalar(tau_m, "tau_m", float, min=-1, max=self.tau_c)
        self.sub = subspace if subspace is not None else Subspace(self.R)
        if self.sub.P.shape[0] != self.R.shape[1]:
            raise ValueError(f"subspace dimension {self.sub.P.shape[0]} != reals dimension {self.R.shape[1]}")
        self.kR = check_scalar(k_real, "k_real", int, min=1)
        self.kV = check_scalar(k_virtual, "k_virtual", int, min=0)
        self.kB = check_scalar(k_batch, "k_batch", int, min=0)
        self.n_iter = check_scalar(n_iter, "n_iter", int, min=0)
        self.eta = check_scalar(eta, "eta", float, min=0, inclusive="neither")
        self.batch = check_scalar(batch, "batch", int, min=1)
        self.kernel = check_choice(kernel, "kernel", KERNELS)
        self.T = check_scalar(T, "T", float, min=0, inclusive="neither")
        self.beta = check_scalar(beta, "beta", float, min=0)
        self.gamma = check_scalar(gamma, "gamma", float, min=0)
        self.max_retries = check_scalar(max_retries, "max_retries", int, min=0)
        self.floor = check_scalar(floor, "floor", float, min=0, max=1)
        self.residual_tol = check_scalar(residual_tol, "residual_tol", float, min=0)
        self.search = check_choice(search, "search", SEARCHES)
        self.containment = bool(containment)
        self.gen = torch.Generator().manual_seed(check_scalar(seed, "seed", int, min=0))
        self._V = torch.empty(0, self.R.shape[1])
        self.log: list[BatchLog] = []
        self._r_index = None if self.search == "torch" else faiss_index(self.R, self.search, nprobe=nprobe)
        self.virtual_shards = check_scalar(virtual_shards, "virtual_shards", int, min=1)
        self._v_index = None if self.search == "torch" else VirtualIndex(self.R.shape[1], self.virtual_shards)

    # ---- state ---------------------------------------------------------------------------------
    @property
    def virtuals(self) -> torch.Tensor:
        """The accepted virtuals (a copy: accepted vectors never change)."""
        return self._V.clone()

    def __len__(self) -> int:
        return self._V.shape[0]

    # ---- neighbours ----------------------------------------------------------------------------
    def _nn(self, x: torch.Tensor, ref: torch.Tensor, k: int, index) -> torch.Tensor:
        if k == 0 or ref.shape[0] == 0:
            return torch.empty(x.shape[0], 0, dtype=torch.long)
        if index is None:
            return knn(x, ref, k)[1]
        _, idx = index.search(np.ascontiguousarray(x.numpy()), min(k, ref.shape[0]))
        idx = torch.from_numpy(idx.astype(np.int64))
        return torch.where(idx < 0, torch.zeros_like(idx), idx)

    def energy(self, x: torch.Tensor) -> torch.Tensor:
        """The truncated energy of the batch x (neighbours gathered at x, held fixed)."""
        with torch.no_grad():
            nr = self.R[self._nn(x, self.R, self.kR, self._r_index)]
            nv = self._V[self._nn(x, self._V, self.kV, self._v_index)]
            if self.kB and x.shape[0] > 1:
                _, ib = knn(x, x, min(self.kB + 1, x.shape[0]))
                nb = x[ib[:, 1:]]
            else:
                nb = x[:, None, :0]
        nb_all = torch.cat([nv, nb.reshape(x.shape[0], -1, x.shape[1])], 1)
        xr = x[:, None, :]
        e = kernel((xr * nr).sum(-1), self.tau_m, self.kernel, self.T).sum()
        if nb_all.shape[1]:
            e = e + self.beta * kernel((xr * nb_all).sum(-1), self.tau_m, self.kernel, self.T).sum()
        if self.containment and self.gamma:
            e = e + self.gamma * F.relu(self.sub.mahal2(x) - self.sub.m_max).pow(2).sum()
        return e

    def optimise(self, x: torch.Tensor) -> torch.Tensor:
        eta = self.eta
        for it in range(self.n_iter):
            x = x.detach().requires_grad_(True)
            (g,) = torch.autograd.grad(self.energy(x), x)
            x = riemannian_step(x.detach(), g, self.sub.P, eta)
            if (it + 1) % 10 == 0:
                eta *= 0.9
        return x.detach()

    def _check(self, x: torch.Tensor) -> torch.Tensor:
        """Exact acceptance: below tau_c to R, to V and to earlier-accepted batch peers (greedy),
        residual <= tol, containment."""
        ok = maxcos(x, self.R) < self.tau_c
        if len(self):
            ok &= maxcos(x, self._V) < self.tau_c
        ok &= self.sub.residual(x) <= self.residual_tol
        if self.containment:
            ok &= self.sub.inside(x)
        idx = ok.nonzero()[:, 0]
        if idx.numel() > 1:                       # greedy in-batch: conflicts are sparse after repulsion
            xs = x[idx]
            conflicts: dict[int, list[int]] = {}
            for a in range(0, xs.shape[0], 4096):
                s = xs[a:a + 4096] @ xs.T
                ii, jj = (s >= self.tau_c).nonzero(as_tuple=True)
                for i, j in zip((ii + a).tolist(), jj.tolist()):
                    if j < i:
                        conflicts.setdefault(i, []).append(j)
            rejected = set()
            for i in sorted(conflicts):
                if any(j not in rejected for j in conflicts[i]):
                    rejected.add(i)
            if rejected:
                ok[idx[sorted(rejected)]] = False
        return ok

    def add_batch(self, n: int | None = None) -> torch.Tensor:
        """Seed, optimise, exactly check and accept one batch (re-seeding rejects up to
        ``max_retries`` times); returns the newly accepted vectors."""
        n = self.batch if n is None else check_scalar(n, "n", int, min=1)
        t0 = time.perf_counter()
        out, first = self._fill(n, lambda k: self.sub.sample(k, self.gen))
        self._V = torch.cat([self._V, out])
        if self._v_index is not None and out.shape[0]:
            self._v_index.add(out.numpy())
        self.log.append(BatchLog(n, first, out.shape[0], time.perf_counter() - t0))
        return out.clone()

    def _fill(self, n: int, sample) -> tuple[torch.Tensor, int]:
        """Seed ``sample(k)``, optimise, check exactly, re-seed the rejects up to ``max_retries`` times;
        (accepted, first-pass count).
        The accepted set is not added to V (the caller does)."""
        new, first, pending = [], None, n
        for _ in range(self.max_retries + 1):
            if pending == 0:
                break
            x = self.optimise(sample(pending))
            ok = self._check_against(x, new)
            new.append(x[ok])
            if first is None:
                first = int(ok.sum())
            pending = int((~ok).sum())
        out = torch.cat(new) if new else torch.empty(0, self.R.shape[1])
        return out, int(first or 0)

    def _check_against(self, x: torch.Tensor, earlier: list[torch.Tensor]) -> torch.Tensor:
        ok = self._check(x)
        if earlier and sum(e.shape[0] for e in earlier):
            ok &= maxcos(x, torch.cat(earlier)) < self.tau_c
        return ok

    def allocate(self, M: int, max_batches: int | None = None) -> torch.Tensor:
        """Add batches until M virtuals are accepted or a batch's first-pass acceptance < floor."""
        M = check_scalar(M, "M", int, min=1)
        while len(self) < M and (max_batches is None or len(self.log) < max_batches):
            self.add_batch(min(self.batch, M - len(self)))
            if self.log[-1].acceptance < self.floor:
                break
        return self.virtuals

    def audit(self, subset: int = 100_000, seed: int = 0) -> Audit:
        return audit(self._V, self.R, self.tau_c, self.sub, subset=subset, seed=seed, shards=self.virtual_shards)


def audit(V: torch.Tensor, R: torch.Tensor, tau_c: float, sub: Subspace | None = None,
          subset: int = 100_000, seed: int = 0, shards: int = 1) -> Audit:
    """Final audit: exact chunked maxcos of every v vs R; virtual-virtual pairs at cos >= tau_c via
    faiss ``range_search`` (brute force when faiss is missing; over ``shards`` shards of the virtual
    index, cross-shard, when > 1) plus brute force on a random subset."""
    shards = check_scalar(shards, "shards", int, min=1)
    tau_c = check_scalar(tau_c, "tau_c", float, min=-1, max=1)
    R = check_unit(R, "R")
    if not isinstance(V, torch.Tensor) or V.ndim != 2 or V.shape[1] != R.shape[1]:
        raise ValueError(f"V must be a (n, {R.shape[1]}) torch.Tensor (dimension mismatch), got "
                         f"{tuple(V.shape) if isinstance(V, torch.Tensor) else type(V).__name__}")
    if V.shape[0]:                                   # an empty allocation audits to zeros
        check_unit(V, "V", dim=R.shape[1])
    n = V.shape[0]
    mc = maxcos(V, R) if n else torch.empty(0)
    real_c = int((mc >= tau_c).sum())
    try:
        idx = VirtualIndex(V.shape[1], shards)
        idx.add(V.numpy())
        # range_search keeps ip > radius; nextafter makes it >= tau_c
        lims, _, nbr = idx.range_search(V.numpy(), float(np.nextafter(np.float32(tau_c), np.float32(-2))))
        rows = np.repeat(np.arange(n), np.diff(lims.astype(np.int64)))
        vv = int((rows < nbr).sum())
    except ImportError:
        vv = int(((maxcos(V, V, exclude_self=True) >= tau_c).sum() + 1) // 2) if n > 1 else 0
    g = torch.Generator().manual_seed(seed)
    s = torch.randperm(n, generator=g)[:min(subset, n)]
    sub_c = 0
    if s.numel() > 1:
        Vs = V[s]
        for a in range(0, Vs.shape[0], 4096):
            sc = Vs[a:a + 4096] @ Vs.T
            rows = torch.arange(a, min(a + 4096, Vs.shape[0]))
            sub_c += int(((sc >= tau_c) & (rows[:, None] < torch.arange(Vs.shape[0])[None, :])).sum())
    res = float(sub.residual(V).max()) if (sub is not None and n) else math.nan
    out = int((~sub.inside(V)).sum()) if (sub is not None and n) else 0
    return Audit(n, real_c, vv, sub_c, int(s.numel()), res, out, mc.numpy())


def enrollment_robustness(new_reals: torch.Tensor, reals: torch.Tensor, virtuals: torch.Tensor,
                          tau_c: float) -> dict:
    """Spec §5: fraction of new reals colliding with >= 1 virtual (a) and with >= 1 old real (b),
    their per-identity rates (a)/M and (b)/N and the ratio of the two."""
    tau_c = check_scalar(tau_c, "tau_c", float, min=-1, max=1)
    reals = check_unit(reals, "reals")
    new_reals = check_unit(new_reals, "new_reals", dim=reals.shape[1])
    virtuals = check_unit(virtuals, "virtuals", dim=reals.shape[1])
    a = float((maxcos(new_reals, virtuals) >= tau_c).float().mean())
    b = float((maxcos(new_reals, reals) >= tau_c).float().mean())
    pa, pb = a / virtuals.shape[0], b / reals.shape[0]
    return {"hit_virtual": a, "hit_real": b, "per_id_virtual": pa, "per_id_real": pb,
            "ratio": (pb / pa) if pa > 0 else math.inf}
