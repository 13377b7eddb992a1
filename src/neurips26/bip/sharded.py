"""Scale-out of the allocator (spec "Scale-out"): the sphere sharded by the Voronoi cells of the IVF
coarse quantizer, one ``GapAllocator`` worker per group of cells, ghost zones, and an exact cross-shard
re-check at the cell borders.

Cells. The IVF quantizer (``IndexIVFFlat`` trained on the reals, ``n_cells`` lists) gives unit centroids
c_1..c_K; x lies in cell a when ``a = argmax_b <x, c_b>``. Cells are dealt to ``n_workers`` workers so
that each holds about the same number of reals (largest cell first, to the least-loaded worker).

Ghost zone. A point x can be within angle theta of some y in cell a only if, for every cell b,

    <x, c_a - c_b> >= -2 sin(theta / 2) ||c_a - c_b||                                     (G)

(y in cell a gives <y, c_a - c_b> >= 0, and |<x - y, c_a - c_b>| <= ||x - y|| ||c_a - c_b|| with the
chord ||x - y|| = 2 sin(angle / 2)). ``ghost_cells`` evaluates (G) in float64 with a 1e-6 slack, so it
only ever over-includes.

Rounds. Every round each worker seeds candidates inside its cells, runs the repulsion of
``GapAllocator`` against the replicated reals R and the ghost set of the accepted virtuals (the rows of
V that satisfy (G) for one of its cells at theta_sep = arccos(tau_m)), and accepts a candidate by the
serial allocator's exact rules (maxcos to R and to its V-ghost set below tau_c, in-batch greedy,
residual, containment). For a candidate that ends in one of the worker's cells the check against V is
exact: by (G) at theta_sep >= arccos(tau_c), every accepted virtual within the collision angle is in
the ghost set. The coordinator then re-checks exactly (``cross_check``): (1) candidates that
optimisation moved into another worker's cell against the rows of V in that cell's ghost zone; (2) the
pairs of candidates from different workers, cell by cell: a candidate in cell a against the other
workers' candidates in a's ghost zone ((G) at arccos(tau_c) for the one in cell a holds whenever the two
collide), dropping the later one of a colliding pair (worker order, then row order). The result meets
the serial allocator's guarantees; ``audit`` (the serial final audit) is run on it all the same.

On gallery (a) the collision angle (~47 deg at tau_c ~0.68) is wide for a 32-dimensional subspace:
(G) puts almost every point in the ghost zone of every cell (the round log counts the border
candidates), so the shards replicate V and the pair re-check is close to all-pairs there; the gain is
the parallel optimisation. (G) prunes cells when the collision angle is small against the cell
spacing (tested at 0.2 rad on a toy).

Backends: ``serial`` (the workers one after another in this process), ``processes`` (one
``torch.distributed`` rank per worker through ``harness.distributed.launch_local``; every rank runs the
same coordinator loop on the all-gathered worker outputs, so all ranks hold the same V; under
``torchrun`` call ``allocate_spmd(job)`` on every rank) and ``ray`` (one Ray actor per worker; Ray is
the optional extra ``scale``, started and shut down around ``allocate`` unless already running). Each
worker's generator is seeded from (seed, worker, round), so the result does not depend on the backend
(tested equal, one thread per process).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from neurips26.bip.allocator import Audit, GapAllocator, audit
from neurips26.bip.gallery import Subspace, as_unit, faiss_index, maxcos
from neurips26.harness.validation import check_choice, check_scalar

BACKENDS = ("serial", "processes", "ray")
GHOST_SLACK = 1e-6            # (G) is evaluated with this slack: over-include, never miss


def ivf_cells(reals: torch.Tensor, n_cells: int) -> torch.Tensor:
    """The unit centroids (n_cells, D) of an ``IndexIVFFlat`` coarse quantizer trained on ``reals``."""
    n_cells = check_scalar(n_cells, "n_cells", int, min=1)
    if n_cells > reals.shape[0]:
        raise ValueError(f"n_cells={n_cells} exceeds the number of reals {reals.shape[0]}")
    index = faiss_index(reals, "ivf", nlist=n_cells, nprobe=1)
    c = torch.from_numpy(index.quantizer.reconstruct_n(0, n_cells).copy())
    return c / c.norm(dim=1, keepdim=True).clamp_min(1e-12)


def cell_of(x: torch.Tensor, centroids: torch.Tensor) -> torch.Tensor:
    """The Voronoi cell of every row: argmax_b <x, c_b>."""
    return (x @ centroids.T).argmax(1)


def ghost_cells(x: torch.Tensor, centroids: torch.Tensor, theta: float, chunk: int = 1024) -> torch.Tensor:
    """(n, K) bool: True where cell a may hold a point within angle ``theta`` of x (test (G))."""
    theta = check_scalar(theta, "theta", float, min=0, max=math.pi)
    C = centroids.double()
    chord = 2 * math.sin(theta / 2)
    dn = torch.cdist(C, C)                                        # ||c_a - c_b||
    out = torch.empty(x.shape[0], C.shape[0], dtype=torch.bool)
    for a in range(0, x.shape[0], chunk):
        s = x[a:a + chunk].double() @ C.T                          # (n, K)
        margin_ab = s[:, :, None] - s[:, None, :] + chord * dn[None]   # <x, c_a - c_b> + chord ||c_a - c_b||
        out[a:a + chunk] = (margin_ab >= -GHOST_SLACK).all(2)
    return out


def deal_cells(cells_of_reals: torch.Tensor, n_cells: int, n_workers: int) -> torch.Tensor:
    """Worker of every cell (n_cells,): largest cell first to the least-loaded worker (ties: lowest id)."""
    counts = torch.bincount(cells_of_reals, minlength=n_cells).tolist()
    load = [0] * n_workers
    owner = [0] * n_cells
    for c in sorted(range(n_cells), key=lambda c: (-counts[c], c)):
        w = min(range(n_workers), key=lambda w: (load[w], w))
        owner[c] = w
        load[w] += counts[c]
    return torch.tensor(owner)


def _seed(seed: int, worker: int, rnd: int) -> int:
    return int(np.random.SeedSequence([seed, worker, rnd]).generate_state(1)[0])


@dataclass
class RoundLog:
    size: int                  # candidates requested (over all workers)
    first_pass: int            # accepted by the workers on their first optimisation pass
    accepted: int              # kept after the retries and the cross-shard re-check
    border: int                # worker-accepted candidates inside another worker's ghost zone
    escaped: int               # worker-accepted candidates that optimisation moved into another worker's cell
    escaped_rejected: int      # escapees dropped by their exact re-check against V
    cross_rejected: int        # dropped by the exact cross-worker pair re-check
    seconds: float

    @property
    def acceptance(self) -> float:
        return self.first_pass / self.size


class _Worker:
    """One shard: a ``GapAllocator`` over the replicated reals, seeding and accepting inside its cells."""

    def __init__(self, job: dict, w: int):
        self.w, self.job = w, job
        self.C = job["centroids"]
        self.mine = job["owner"] == w                              # (K,) cells of this worker
        self.alloc = GapAllocator(job["reals"], job["tau_c"], job["tau_m"], job["sub"], batch=1,
                                  seed=0, **job["alloc_kw"])
        self.alloc._v_index = None            # the V-ghost set changes every round: brute-force neighbours

    def _in_mine(self, x: torch.Tensor) -> torch.Tensor:
        return self.mine[cell_of(x, self.C)]

    def round(self, V_ghost: torch.Tensor, n: int, rnd: int) -> tuple[torch.Tensor, int]:
        """Candidates accepted in this round (not yet cross-checked) and the first-pass count."""
        if n == 0 or not bool(self.mine.any()):
            return torch.empty(0, self.C.shape[1]), 0
        gen = torch.Generator().manual_seed(_seed(self.job["seed"], self.w, rnd))
        sub = self.alloc.sub

        def sample(k: int) -> torch.Tensor:                       # in-manifold seeds inside my cells
            got, total = [], 0
            for _ in range(200):
                x = sub.sample(max(4 * k, 64), gen)
                x = x[self._in_mine(x)]
                got.append(x)
                total += x.shape[0]
                if total >= k:
                    break
            return torch.cat(got)[:k]

        self.alloc._V = V_ghost
        return self.alloc._fill(n, sample)


def _split(n: int, parts: int) -> list[int]:
    return [n // parts + (1 if i < n % parts else 0) for i in range(parts)]


def cross_check(cands: list[torch.Tensor], owner: torch.Tensor, centroids: torch.Tensor, tau_c: float,
                V: torch.Tensor, V_ghost: torch.Tensor) -> tuple[list[torch.Tensor], dict]:
    """Keep-masks for every worker's candidates after the exact cross-shard re-check, with counts.

    1. A candidate u that optimisation moved out of its worker's cells (an *escapee*) was checked by the
       worker only against V near the worker's cells: it is re-checked exactly against the rows of V
       whose ghost zone (``V_ghost``, (G) at an angle >= arccos(tau_c)) holds u's cell.
    2. Pairs (u, v) of different workers with cos(u, v) >= tau_c have, by (G) at arccos(tau_c) for v in
       its cell, u in the ghost zone of cell(v): for every cell a, the candidates inside a are compared
       exactly with the other workers' candidates in a's ghost zone, and the later one of every colliding
       pair (worker order, then row order) is dropped unless its partner was dropped already.
    """
    keep = [torch.ones(c.shape[0], dtype=torch.bool) for c in cands]
    stats = {"border": 0, "escaped": 0, "escaped_rejected": 0, "cross_rejected": 0}
    if not sum(c.shape[0] for c in cands):
        return keep, stats
    X = torch.cat(cands)
    wid = torch.cat([torch.full((c.shape[0],), w) for w, c in enumerate(cands)])
    start = np.cumsum([0] + [c.shape[0] for c in cands])
    cell = cell_of(X, centroids)
    G = ghost_cells(X, centroids, math.acos(tau_c))
    stats["border"] = int((G & (owner[None, :] != wid[:, None])).any(1).sum())
    alive = torch.ones(X.shape[0], dtype=torch.bool)
    esc = (owner[cell] != wid).nonzero()[:, 0]
    stats["escaped"] = int(esc.numel())
    for a in cell[esc].unique().tolist():                 # escapees of one cell share its V rows
        r = esc[cell[esc] == a]
        bad = r[maxcos(X[r], V[V_ghost[:, a]]) >= tau_c]
        alive[bad] = False
        stats["escaped_rejected"] += int(bad.numel())
    pairs = set()
    for a in range(centroids.shape[0]):
        p = (cell == a).nonzero()[:, 0]
        q = G[:, a].nonzero()[:, 0]
        if p.numel() == 0 or q.numel() == 0:
            continue
        hit = ((X[p] @ X[q].T) >= tau_c) & (wid[p][:, None] != wid[q][None, :])
        for i, j in hit.nonzero().tolist():
            u, v = int(p[i]), int(q[j])
            pairs.add((min(u, v), max(u, v)))
    for u, v in sorted(pairs, key=lambda t: (t[1], t[0])):       # decide rows in global order
        if alive[u] and alive[v]:
            alive[v] = False
            stats["cross_rejected"] += 1
    for w in range(len(cands)):
        keep[w] = alive[start[w]:start[w + 1]].clone()
    return keep, stats


class ShardedAllocator:
    """The Voronoi/IVF-sharded allocator: same acceptance rules and guarantees as ``GapAllocator``.

    n_workers: shards (cells dealt to them by real count); n_cells: IVF lists (>= n_workers);
    batch: candidates per round over all workers; backend: ``serial`` | ``processes`` | ``ray``;
    alloc_kw: the per-worker ``GapAllocator`` knobs (n_iter, eta, kernel, T, beta, gamma, k_real,
    k_virtual, k_batch, max_retries, residual_tol, containment, search). ``floor`` stops allocation when a
    round's first-pass acceptance falls below it (as in the serial allocator).
    """

    def __init__(self, reals, tau_c: float, tau_m: float, subspace: Subspace | None = None,
                 n_workers: int = 2, n_cells: int = 16, batch: int = 4000, backend: str = "serial",
                 floor: float = 0.5, seed: int = 0, **alloc_kw):
        R = as_unit(reals, "reals")
        n_workers = check_scalar(n_workers, "n_workers", int, min=1)
        n_cells = check_scalar(n_cells, "n_cells", int, min=1)
        if n_cells < n_workers:
            raise ValueError(f"n_cells={n_cells} must be >= n_workers={n_workers} (every worker owns a cell)")
        for bad in ("floor", "batch", "seed"):
            if bad in alloc_kw:
                raise ValueError(f"{bad} is a ShardedAllocator argument, not a per-worker one")
        self.backend = check_choice(backend, "backend", BACKENDS)
        sub = subspace if subspace is not None else Subspace(R)
        probe = GapAllocator(R, tau_c, tau_m, sub, **alloc_kw)     # validates every knob once
        C = ivf_cells(R, n_cells)
        self.job = {"reals": R, "tau_c": probe.tau_c, "tau_m": probe.tau_m, "sub": sub, "centroids": C,
                    "owner": deal_cells(cell_of(R, C), n_cells, n_workers), "n_workers": n_workers,
                    "batch": check_scalar(batch, "batch", int, min=1),
                    "floor": check_scalar(floor, "floor", float, min=0, max=1),
                    "seed": check_scalar(seed, "seed", int, min=0), "alloc_kw": dict(alloc_kw)}
        self.V = torch.empty(0, R.shape[1])
        self.log: list[RoundLog] = []

    def allocate(self, M: int, max_rounds: int | None = None, timeout: float | None = None) -> torch.Tensor:
        """Rounds until M virtuals (or the floor, or ``max_rounds``); returns V (append-only)."""
        M = check_scalar(M, "M", int, min=1)
        if max_rounds is not None:
            max_rounds = check_scalar(max_rounds, "max_rounds", int, min=1)
        job = self.job | {"M": M, "max_rounds": max_rounds, "V0": self.V, "r0": len(self.log)}
        if self.backend == "serial":
            V, log = _coordinate(job, _SerialMap(job))
        elif self.backend == "processes":
            from neurips26.harness.distributed import launch_local
            world = job["n_workers"]
            outs = launch_local(allocate_spmd, job, world=world, timeout=timeout)
            for V_r, _ in outs[1:]:                                # every rank ran the same coordinator
                if not torch.equal(V_r, outs[0][0]):
                    raise RuntimeError("ranks disagree on the accepted virtuals")
            V, log = outs[0]
        else:
            rmap = _RayMap(job)
            try:
                V, log = _coordinate(job, rmap)
            finally:
                rmap.close()
        self.V = V
        self.log.extend(log)
        return self.V.clone()

    def __len__(self) -> int:
        return self.V.shape[0]

    @property
    def virtuals(self) -> torch.Tensor:
        return self.V.clone()

    def audit(self, subset: int = 100_000, seed: int = 0) -> Audit:
        """The serial allocator's final exact audit on the sharded result."""
        return audit(self.V, self.job["reals"], self.job["tau_c"], self.job["sub"], subset=subset, seed=seed)


def _coordinate(job: dict, wmap) -> tuple[torch.Tensor, list[RoundLog]]:
    """The coordinator loop (identical on every rank): rounds of worker outputs -> cross check -> V."""
    C, owner, W = job["centroids"], job["owner"], job["n_workers"]
    theta_m = math.acos(job["tau_m"])
    V = job["V0"]
    ghost = ghost_cells(V, C, theta_m) if V.shape[0] else torch.empty(0, C.shape[0], dtype=torch.bool)
    log: list[RoundLog] = []
    rnd = job["r0"]
    while V.shape[0] < job["M"] and (job["max_rounds"] is None or len(log) < job["max_rounds"]):
        t0 = time.perf_counter()
        n = min(job["batch"], job["M"] - V.shape[0])
        sizes = _split(n, W)
        mine = [owner == w for w in range(W)]
        ghosts = [V[(ghost & mine[w][None, :]).any(1)] for w in range(W)]
        outs = wmap(ghosts, sizes, rnd)                            # {w: (candidates, first_pass)}
        cands = [outs[w][0] for w in range(W)]
        keep, st = cross_check(cands, owner, C, job["tau_c"], V, ghost)
        new = torch.cat([c[k] for c, k in zip(cands, keep)])
        V = torch.cat([V, new])
        ghost = torch.cat([ghost, ghost_cells(new, C, theta_m)]) if new.shape[0] else ghost
        log.append(RoundLog(n, sum(outs[w][1] for w in range(W)), new.shape[0], st["border"], st["escaped"],
                            st["escaped_rejected"], st["cross_rejected"], time.perf_counter() - t0))
        rnd += 1
        if log[-1].acceptance < job["floor"]:
            break
    return V, log


class _SerialMap:
    def __init__(self, job: dict):
        self.workers = [_Worker(job, w) for w in range(job["n_workers"])]

    def __call__(self, ghosts, sizes, rnd):
        return {w: wk.round(ghosts[w], sizes[w], rnd) for w, wk in enumerate(self.workers)}


class _DistMap:
    """This rank's workers (w % world == rank), outputs all-gathered so every rank sees all of them."""

    def __init__(self, job: dict):
        import torch.distributed as dist

        self.dist, self.rank, self.world = dist, dist.get_rank(), dist.get_world_size()
        self.workers = {w: _Worker(job, w) for w in range(job["n_workers"]) if w % self.world == self.rank}

    def __call__(self, ghosts, sizes, rnd):
        mine = {w: wk.round(ghosts[w], sizes[w], rnd) for w, wk in self.workers.items()}
        gathered: list = [None] * self.world
        self.dist.all_gather_object(gathered, mine)
        return {w: out for part in gathered for w, out in part.items()}


class _RayMap:
    """One Ray actor per worker (Ray must be installed: ``pip install ray``)."""

    def __init__(self, job: dict):
        try:
            import ray
        except ImportError as e:
            raise ImportError("backend='ray' needs Ray (pip install ray); backend='processes' runs the same "
                              "shards on torch.distributed ranks") from e
        self.started = not ray.is_initialized()
        if self.started:
            ray.init(num_cpus=job["n_workers"], include_dashboard=False, log_to_driver=False)
        self.ray = ray
        actor = ray.remote(num_cpus=1)(_Worker)
        self.workers = [actor.remote(job, w) for w in range(job["n_workers"])]

    def __call__(self, ghosts, sizes, rnd):
        futs = [wk.round.remote(ghosts[w], sizes[w], rnd) for w, wk in enumerate(self.workers)]
        return dict(enumerate(self.ray.get(futs)))

    def close(self) -> None:
        """Kill the actors; shut Ray down if this map started it."""
        for wk in self.workers:
            self.ray.kill(wk)
        if self.started:
            self.ray.shutdown()


def allocate_spmd(job: dict) -> tuple[torch.Tensor, list[RoundLog]]:
    """The sharded allocation on one rank of an initialised process group (``torchrun`` or
    ``launch_local``); every rank returns the same (V, round log)."""
    return _coordinate(job, _DistMap(job))


__all__ = ["BACKENDS", "RoundLog", "ShardedAllocator", "allocate_spmd", "cell_of", "cross_check",
           "deal_cells", "ghost_cells", "ivf_cells"]
