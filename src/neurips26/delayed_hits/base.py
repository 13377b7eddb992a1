"""The records every module shares: the ``Policy`` protocol, ``SimResult``, ``InvariantError``.

A leaf module (it imports only the trace, the kernels and the shadow loss), so the engine
(``simulator.py``) and the policies import it and never each other. A policy that has a compiled
kernel says so itself: ``Policy.run_kernel`` returns the ``SimResult`` of its kernel, or None when
it has none for these options (then ``simulate`` runs the Python engine). No module switches on
the policy's type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from neurips26.harness.validation import check_scalar
from neurips26.delayed_hits.kernels import shadow_kernel, trace_arrays
from neurips26.delayed_hits.shadow import static_opt_cost
from neurips26.delayed_hits.trace import Trace


def check_cache_args(K, Z, n_items: int) -> tuple[int, int, int]:
    """K >= 1 and Z >= 1; returns (K, Z, K_eff) with K_eff = min(K, N): a cache that holds every
    item (K >= N) never evicts, so the policies run with capacity N (the all-hit case: only the
    first request of each item misses)."""
    K = check_scalar(K, "K", int, min=1)
    Z = check_scalar(Z, "Z", int, min=1)
    return K, Z, min(K, n_items)


class InvariantError(AssertionError):
    """A slot invariant (|C| <= K, C and F disjoint, latency range) was violated."""


@dataclass
class SimResult:
    """Metrics of one run (slots after the warm-up only, except ``shadow_loss_per_item``)."""

    policy: str
    K: int
    Z: int
    n_slots: int
    n_requests: int
    total_latency: int
    hits: int
    delayed_hits: int
    misses: int
    admissions: int
    evictions: int
    shadow_cost: int
    shadow_loss_per_item: np.ndarray = field(repr=False)
    checkpoints: dict = field(default_factory=dict, repr=False)
    latencies: np.ndarray | None = field(default=None, repr=False)
    extra: dict = field(default_factory=dict, repr=False)

    @property
    def mean_latency(self) -> float:
        return self.total_latency / max(self.n_requests, 1)

    @property
    def miss_ratio(self) -> float:
        return self.misses / max(self.n_requests, 1)

    @property
    def delayed_hit_ratio(self) -> float:
        return self.delayed_hits / max(self.n_requests, 1)

    @property
    def cache_changes(self) -> int:
        """Number of admissions plus evictions."""
        return self.admissions + self.evictions

    def static_opt(self) -> int:
        """min_S sum_{i not in S} L_T(i) (the static comparator's latency over the whole run)."""
        return static_opt_cost(self.shadow_loss_per_item, self.K)

    def static_regret(self) -> int:
        return self.total_latency - self.static_opt()

    def shadow_regret(self) -> int:
        return self.shadow_cost - self.static_opt()

    def summary(self) -> dict:
        return {"policy": self.policy, "K": self.K, "Z": self.Z, "T": self.n_slots,
                "requests": self.n_requests, "total_latency": self.total_latency,
                "mean_latency": self.mean_latency, "miss_ratio": self.miss_ratio,
                "delayed_hit_ratio": self.delayed_hit_ratio, "cache_changes": self.cache_changes,
                "shadow_cost": self.shadow_cost}


def kernel_result(name: str, tr: Trace, K: int, Z: int, stats: np.ndarray, cp: np.ndarray,
                  cps: np.ndarray, extra: dict | None = None) -> SimResult:
    """The ``SimResult`` of a kernel run: ``stats`` = (latency, hits, delayed hits, misses,
    admissions, evictions, shadow cost, requests), ``cp[k]`` = (latency, shadow) at slot ``cps[k]``;
    the per-item shadow loss comes from ``shadow_kernel`` (action independent)."""
    ids, ptr, one = trace_arrays(tr)
    L = shadow_kernel(ids, ptr, one, Z, tr.n_items, np.zeros(0, dtype=np.int64))[0]
    cp_out = {int(t): (int(cp[k, 0]), int(cp[k, 1]), None) for k, t in enumerate(cps)}
    return SimResult(policy=name, K=K, Z=Z, n_slots=tr.n_slots, n_requests=int(stats[7]),
                     total_latency=int(stats[0]), hits=int(stats[1]), delayed_hits=int(stats[2]),
                     misses=int(stats[3]), admissions=int(stats[4]), evictions=int(stats[5]),
                     shadow_cost=int(stats[6]), shadow_loss_per_item=L, checkpoints=cp_out,
                     extra=dict(extra or {}))


def checkpoint_array(checkpoints: Iterable[int]) -> np.ndarray:
    """Sorted distinct checkpoint slots as the int64 array the kernels take."""
    return np.asarray(sorted(set(int(c) for c in checkpoints)), dtype=np.int64)


class Policy:
    """Base class of a caching policy driven by :func:`simulate`.

    Subclasses set the ``uses_*`` flags for the hooks they implement (unused hooks are not called,
    which keeps the per-request loop short) and implement ``admit``.
    """

    name = "policy"
    uses_request = False
    uses_hit = False
    uses_miss = False
    uses_slot_end = False
    uses_prefetch = False

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        """Called once before the run with the trace (offline policies may read it)."""
        self.K, self.Z, self.N = K, Z, trace.n_items

    def initial_cache(self) -> Iterable[int]:
        """Contents of the cache at the start (pre-loaded static sets)."""
        return ()

    def on_request(self, i: int, t: int) -> None:  # pragma: no cover - optional hook
        pass

    def on_hit(self, i: int, t: int) -> None:  # pragma: no cover - optional hook
        pass

    def on_miss(self, i: int, t: int) -> None:  # pragma: no cover - optional hook
        pass

    def on_slot_end(self, t: int) -> None:  # pragma: no cover - optional hook
        """After the completions of slot t."""

    def prefetch(self, t: int, cache: set, inflight: dict) -> list:  # pragma: no cover - optional
        """Items to fetch without a request, decided at the end of slot t (after ``on_slot_end``).
        Each starts a fetch in slot t + 1 (completing at the end of slot t + Z); requests that
        arrive meanwhile are delayed hits."""
        return []

    def admit(self, i: int, t: int, ad: int, cache: set) -> tuple[bool, int | None]:
        """Fetch of i completed at the end of slot t with aggregate delay ``ad``.

        Returns (admit, victim). When admitting into a full cache, victim must be a cached item.
        The policy updates its own bookkeeping for both i and the victim.
        """
        raise NotImplementedError

    def admit_bytes(self, i: int, t: int, ad: int, cache: set, need: int,
                    size: dict) -> tuple[bool, list]:
        """Byte capacity (``capacity="bytes"``): the fetch of i completed at the end of slot t and
        ``need`` more bytes must be freed to fit it (<= 0: it fits). Returns (admit, victims) with
        sum(size[v] for v in victims) >= need when admitting; ``size`` maps every cached item to
        its bytes. Policies without a byte rule raise."""
        raise NotImplementedError(f"policy {self.name} has no byte-capacity rule "
                                  "(capacity='bytes' supports LRU, FIFO, LRU-MAD)")

    def run_kernel(self, tr: Trace, K: int, Z: int, checkpoints: Sequence[int] = ()) -> SimResult | None:
        """The whole run in a compiled kernel taking this policy's exact decisions, or None when
        the policy has no kernel for its options (the default). ``K``/``Z``/``checkpoints`` are
        already validated by ``simulate``; the result equals the Python engine's (tested)."""
        return None
