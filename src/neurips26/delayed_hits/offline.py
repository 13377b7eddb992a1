"""Offline policies (they read the whole trace at ``reset``): Belady in two rule sets, static sets.

| name            | rule                                                                          |
| Belady          | ours: always admit at completion, evict the cached item whose next request    |
|                 | (after its most recent one) is farthest (libCacheSim 0.3.5's Belady also      |
|                 | always inserts)                                                               |
| Belady-Atre     | Atre et al.'s ``cache_belady.cpp``: at a completion in slot t with a full     |
|                 | cache, a cached item's next request is its first one at or after slot t (a    |
|                 | request in the completion slot itself counts), the incoming item's is its     |
|                 | first one after slot t; the incoming item is refused (bypass) when its next   |
|                 | request is at or beyond the farthest cached one, else that one is evicted     |
| StaticPolicy    | a pre-loaded fixed set S, never admits anything (the static comparator)       |
| StaticOPT       | the top-K items of L_T, pre-loaded (static hindsight OPT)                     |

"Next request" is measured in request positions (for a one-request-per-slot trace, the slot): in
a batched trace two items may share a next slot, and positions break the tie by arrival order.
"""

from __future__ import annotations

import heapq

import numpy as np

from neurips26.harness.validation import check_choice
from neurips26.delayed_hits.base import Policy
from neurips26.delayed_hits.shadow import shadow_losses, top_k
from neurips26.delayed_hits.trace import Trace, next_access_positions

NEVER = np.iinfo(np.int64).max      # "no further request"


class Belady(Policy):
    """Offline Belady (Z-agnostic).

    admission:    "always" (ours, the default): every completed fetch is admitted;
                  "bypass" (Atre et al.): with a full cache, refuse the incoming item i when
                  next(i) >= max_{j in C} next(j), else evict the argmax.
    next_request: "after" (ours, the default): a cached item's next request is the first one after
                  its most recent request; "atre": the first one at or after the completion slot
                  t, so an item requested in slot t itself has next = now and is never the victim.
    ``Belady(admission="bypass", next_request="atre")`` is Atre et al.'s ``BeladyCache``
    (``make_policy("Belady-Atre")``); the incoming item's next request is its first one after t
    in both rule sets.
    """

    name = "Belady"
    uses_request = True

    def __init__(self, admission: str = "always", next_request: str = "after",
                 name: str | None = None) -> None:
        self.admission = check_choice(admission, "admission", ("always", "bypass"))
        self.next_request = check_choice(next_request, "next_request", ("after", "atre"))
        if name is not None:
            self.name = name
        elif (admission, next_request) == ("bypass", "atre"):
            self.name = "Belady-Atre"
        elif (admission, next_request) != ("always", "after"):
            self.name = f"Belady({admission},{next_request})"

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        super().reset(trace, K, Z)
        if not isinstance(trace, Trace):
            raise TypeError("Belady is offline: it needs the whole trace (simulate, not a stream)")
        nxt_pos = next_access_positions(trace.ids)
        if self.admission == "always" and self.next_request == "after":
            # the original rule set keys by next *slot* (ties: the smaller id), kept bit-identical
            slots = trace.slot_of_request()
            self._next = np.where(nxt_pos >= 0, slots[np.maximum(nxt_pos, 0)], NEVER)
        else:
            self._next = np.where(nxt_pos >= 0, nxt_pos, NEVER)
        self._p = 0
        self.nxt: dict[int, int] = {}                 # item -> key of its next request
        self._last_t: dict[int, int] = {}             # item -> slot of its most recent request
        self._first_in_slot: dict[int, int] = {}      # item -> its first position in that slot
        self._heap: list = []                         # (-next, item), lazy deletion
        self._cached: set = set()

    def on_request(self, i, t):
        p = self._p
        self._p += 1
        if self._last_t.get(i) != t:
            self._last_t[i] = t
            self._first_in_slot[i] = p
        ns = int(self._next[p])
        self.nxt[i] = ns
        if i in self._cached:
            heapq.heappush(self._heap, (-ns, i))

    def _pop_farthest(self) -> tuple[int, int]:
        """Pop the valid heap entry with the largest next key: (next, item)."""
        h = self._heap
        while True:
            negns, j = heapq.heappop(h)
            if j in self._cached and self.nxt[j] == -negns:
                return -negns, j

    def _victim(self, t: int) -> tuple[int, int]:
        """(next, item) of the cached item with the farthest next request at the end of slot t."""
        if self.next_request == "after":
            ns, j = self._pop_farthest()
            heapq.heappush(self._heap, (-ns, j))
            return ns, j
        # "atre": items requested in slot t have next = their first position in slot t, which
        # is smaller than any other cached item's next (those lie after slot t); skip them
        aside = []
        best = None
        while len(aside) < len(self._cached):
            ns, j = self._pop_farthest()
            aside.append((ns, j))
            if self._last_t.get(j) != t:
                best = (ns, j)
                break
        for ns, j in aside:
            heapq.heappush(self._heap, (-ns, j))
        if best is None:                              # every cached item was requested in slot t
            best = max((self._first_in_slot[j], j) for _, j in aside)
        return best

    def admit(self, i, t, ad, cache):
        victim = None
        if len(self._cached) >= self.K:
            far, victim = self._victim(t)
            if self.admission == "bypass" and self.nxt[i] >= far:
                return False, None                    # next(i) >= farthest cached: refuse i
            self._cached.discard(victim)
        self._cached.add(i)
        heapq.heappush(self._heap, (-self.nxt[i], i))
        if len(self._heap) > 8 * self.K + 64:
            self._heap = [(-self.nxt[j], j) for j in self._cached]
            heapq.heapify(self._heap)
        return True, victim


class StaticPolicy(Policy):
    """Pre-loaded fixed set S (|S| <= K) that never admits anything else: its latency equals
    sum_{i not in S} L_T(i) exactly (spec §2). ``items`` are the trace's item indices 0..N-1."""

    name = "static"

    def __init__(self, items) -> None:
        arr = np.asarray(list(items), dtype=np.int64)
        if arr.ndim != 1 or len(set(arr.tolist())) != arr.size:
            raise ValueError("items must be a 1-D collection of distinct item ids")
        self.items = arr

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        super().reset(trace, K, Z)
        if self.items.size > K:
            raise ValueError(f"items: static set has {self.items.size} items > K={K}")
        if self.items.size and (self.items.min() < 0 or self.items.max() >= trace.n_items):
            raise ValueError(f"items must be in [0, {trace.n_items})")

    def initial_cache(self):
        return self.items.tolist()

    def admit(self, i, t, ad, cache):
        return False, None


class StaticOPT(StaticPolicy):
    """Static hindsight OPT: the top-K items of L_T (the static-regret comparator), pre-loaded."""

    name = "static-OPT"

    def __init__(self) -> None:
        self.items = np.zeros(0, dtype=np.int64)

    def reset(self, trace: Trace, K: int, Z: int) -> None:
        if not isinstance(trace, Trace):
            raise TypeError("StaticOPT is offline: it needs the whole trace")
        self.items = top_k(shadow_losses(trace, Z), min(K, trace.n_items))
        super().reset(trace, K, Z)
