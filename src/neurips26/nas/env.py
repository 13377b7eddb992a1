"""A gymnasium-style environment around a tabular MDP (``reset``/``step``), plus generative access.

Any object with ``reset(seed=...) -> (state, info)``, ``step(action) -> (state, reward, terminated,
truncated, info)``, ``observation_space.n`` and ``action_space.n`` (integer states/actions, a
continuing task: ``terminated`` is ignored, there are no resets) can be given to ``identify``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from neurips26.nas.mdp import MDP


@dataclass(frozen=True)
class Discrete:
    """Minimal stand-in for ``gymnasium.spaces.Discrete`` (only ``n``)."""

    n: int

    def contains(self, x) -> bool:
        return isinstance(x, (int, np.integer)) and 0 <= int(x) < self.n


class TabularEnv:
    """Online access to an MDP: s_{t+1} ~ p(. | s_t, a_t), reward r(s_t, a_t) (deterministic)."""

    def __init__(self, mdp: MDP, seed: int | None = None):
        if not isinstance(mdp, MDP):
            raise TypeError(f"mdp must be an neurips26.nas.MDP, got {type(mdp).__name__}")
        self.mdp = mdp
        self.observation_space = Discrete(mdp.S)
        self.action_space = Discrete(mdp.A)
        cdf = np.cumsum(mdp.P, axis=2)
        cdf[:, :, -1] = 1.0
        self._cdf = [[list(cdf[s, a]) for a in range(mdp.A)] for s in range(mdp.S)]
        self._r = mdp.r.tolist()
        self._rng = np.random.default_rng(seed)
        self._s = mdp.s0

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._s = self.mdp.s0
        return self._s, {}

    def _draw(self, s: int, a: int) -> int:
        return bisect.bisect_right(self._cdf[s][a], self._rng.random())

    def step(self, action: int):
        a = int(action)
        if not 0 <= a < self.mdp.A:
            raise ValueError(f"action must be in [0, {self.mdp.A - 1}], got {action}")
        s = self._s
        s2 = self._draw(s, a)
        self._s = s2
        return s2, self._r[s][a], False, False, {}

    def sample(self, state: int, action: int) -> tuple[int, float]:
        """Generative-model access (KLB-TS baseline): a draw of s' ~ p(.|s,a) and r(s,a)."""
        return self._draw(int(state), int(action)), self._r[state][action]
