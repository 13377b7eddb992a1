"""Adaptive restarts for UCB-DH and LA-FTPL: doubling epochs (no horizon needed) and a change
detector on the shadow loss (no change count needed). Both only choose the restart slots; the
restart itself is the policy's (counts / L reset, gamma redrawn, cache kept).

* **Doubling** (unknown T). Epoch k covers H0 2^k slots; inside it the policy restarts with the
  period its fixed-horizon rule gives for T = the epoch length (``ucb_restart_period`` /
  ``ftpl_restart_period``), and once more at the epoch's end. B (the comparator's number of changes)
  is still given a priori.
* **Change detection** (unknown B). The shadow loss is action independent, so the detector sees the
  same statistic whatever the policy did. After every window of W slots it compares the epoch's
  leader S_e = top-K(L since the last restart) with the window's own leader S_w = top-K(L of the
  window):

      drift = 1 - L_w(S_e) / L_w(S_w)       (the share of the window's best static gain that the
                                             epoch leader misses; 0 when they agree)

  and restarts at the window's end when drift > ``threshold`` and the epoch is at least
  ``min_epoch`` slots old. Each decision reads only slots up to the restart slot, so computing the
  restart slots in one pass over the trace at ``reset`` (what ``DetectRestartUCBDH/LAFTPL`` do)
  takes the decisions an online detector would; a stream (``Cache``) has no such pass, so these two
  policies need the whole trace.
"""

from __future__ import annotations

import numpy as np

from neurips26.harness.validation import check_scalar
from neurips26.delayed_hits.la_ftpl import LAFTPL, ftpl_restart_period
from neurips26.delayed_hits.shadow import shadow_losses, top_k
from neurips26.delayed_hits.trace import Trace
from neurips26.delayed_hits.ucb_dh import UCBDH, ucb_restart_period


def doubling_restarts(T: int, period, H0: int) -> list[int]:
    """Restart slots of the doubling scheme up to T: epochs [s, s + E) with E = H0 2^k, and inside
    each, restarts every ``period(E)`` slots (plus one at the epoch's end)."""
    T = check_scalar(T, "T", int, min=1)
    H0 = check_scalar(H0, "H0", int, min=1)
    out, s, E = [], 0, H0
    while s < T:
        H = max(int(period(E)), 1)
        r = s + H
        while r < s + E and r < T:
            out.append(r)
            r += H
        if s + E < T:
            out.append(s + E)
        s += E
        E *= 2
    return sorted(set(out))


def detect_restarts(trace: Trace, Z: int, K: int, window: int, threshold: float = 0.5,
                    min_epoch: int | None = None) -> list[int]:
    """Restart slots chosen by the shadow-loss drift detector (module docstring)."""
    window = check_scalar(window, "window", int, min=1)
    threshold = check_scalar(threshold, "threshold", float, min=0.0, max=1.0)
    min_epoch = window if min_epoch is None else check_scalar(min_epoch, "min_epoch", int, min=1)
    T = trace.n_slots
    grid = list(range(window, T + 1, window))
    if len(grid) < 2:
        return []
    _, snaps = shadow_losses(trace, Z, grid=grid)
    K = min(K, trace.n_items)
    out: list[int] = []
    start = 0                                           # slot of the last restart (0: none)
    prev = np.zeros(trace.n_items, dtype=np.int64)      # L at the end of the previous window
    base = prev                                         # L at the last restart
    for k, g in enumerate(grid):
        cur = snaps[k]
        if k > 0 and g - start - window >= min_epoch:   # the epoch before this window is old enough
            epoch = prev - base                         # L of the epoch (before this window)
            win = cur - prev                            # L of this window
            best = win[top_k(win, K)].sum()
            if best > 0:
                drift = 1.0 - win[top_k(epoch, K)].sum() / best     # 1 - L_w(S_e) / L_w(S_w)
                if drift > threshold:
                    out.append(int(g))
                    start, base = g, cur
        prev = cur
    return out


class DoublingRestartUCBDH(UCBDH):
    """UCB-DH restarted on doubling epochs (``doubling_restarts`` with ``ucb_restart_period``)."""

    name = "UCB-DH-doubling"

    def __init__(self, B: int, H0: int = 1024, **kw) -> None:
        self.B = check_scalar(B, "B", int, min=0)
        self.H0 = check_scalar(H0, "H0", int, min=2)
        super().__init__(**kw)

    def reset(self, trace, K, Z):
        T = trace.n_slots
        self.restart_at = doubling_restarts(T, lambda E: ucb_restart_period(max(E, 2), self.B), self.H0)
        super().reset(trace, K, Z)


class DoublingRestartLAFTPL(LAFTPL):
    """LA-FTPL restarted on doubling epochs (``doubling_restarts`` with ``ftpl_restart_period``)."""

    name = "LA-FTPL-doubling"

    def __init__(self, B: int, H0: int = 1024, **kw) -> None:
        self.B = check_scalar(B, "B", int, min=0)
        self.H0 = check_scalar(H0, "H0", int, min=2)
        super().__init__(**kw)

    def reset(self, trace, K, Z):
        T, N = trace.n_slots, trace.n_items
        self.restart_at = doubling_restarts(T, lambda E: ftpl_restart_period(E, K, max(N, 2), self.B),
                                            self.H0)
        super().reset(trace, K, Z)


class _Detect:
    """Change-detection restarts: the restart slots come from one causal pass over the trace at
    ``reset`` (``detect_restarts``); the learner (the next class in the MRO) does the rest."""

    def __init__(self, window: int | None = None, threshold: float = 0.5, **kw) -> None:
        self.window = None if window is None else check_scalar(window, "window", int, min=1)
        self.threshold = check_scalar(threshold, "threshold", float, min=0.0, max=1.0)
        super().__init__(**kw)

    def reset(self, trace, K, Z):
        if not isinstance(trace, Trace):
            raise TypeError(f"{self.name} computes its restart slots in one causal pass over the "
                            "whole trace; a stream has none (use the doubling variant)")
        W = self.window or max(1024, 20 * K)
        self.restart_at = detect_restarts(trace, Z, K, W, self.threshold)
        super().reset(trace, K, Z)


class DetectRestartUCBDH(_Detect, UCBDH):
    """UCB-DH restarted when the shadow-loss drift detector fires (``detect_restarts``)."""

    name = "UCB-DH-detect"


class DetectRestartLAFTPL(_Detect, LAFTPL):
    """LA-FTPL restarted when the shadow-loss drift detector fires (``detect_restarts``)."""

    name = "LA-FTPL-detect"
