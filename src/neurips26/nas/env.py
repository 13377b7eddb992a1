"""A gymnasium environment around a tabular MDP (``reset``/``step``), plus generative access.

``TabularEnv`` is a ``gymnasium.Env`` (it passes ``gymnasium.utils.env_checker.check_env``):
``observation_space = Discrete(S)``, ``action_space = Discrete(A)``, seeding through
``reset(seed=...)`` and ``self.np_random`` (gymnasium's ``np_random(seed)`` is
``Generator(PCG64(SeedSequence(seed)))``, the same stream as ``numpy.random.default_rng(seed)``),
``render_mode`` ``None`` or ``"ansi"``. The task is continuing: ``terminated`` is always False and
there are no resets during identification. Without gymnasium installed the class still works (same
API and draws) with a minimal ``Discrete`` stand-in, so the package imports without the extra.

Any object with ``reset(seed=...) -> (state, info)``, ``step(action) -> (state, reward, terminated,
truncated, info)``, ``observation_space.n`` and ``action_space.n`` can be given to ``identify``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from neurips26.nas.mdp import MDP

try:  # gymnasium is in the nas extra; without it TabularEnv keeps the same API on a plain base
    import gymnasium
    from gymnasium import spaces as _spaces

    HAVE_GYMNASIUM = True
    _Base = gymnasium.Env
except ImportError:  # pragma: no cover - exercised only without gymnasium
    HAVE_GYMNASIUM = False
    _Base = object

RENDER_MODES = ("ansi",)


@dataclass(frozen=True)
class Discrete:
    """Minimal stand-in for ``gymnasium.spaces.Discrete`` (only ``n``; used without gymnasium)."""

    n: int

    def contains(self, x) -> bool:
        return isinstance(x, (int, np.integer)) and 0 <= int(x) < self.n


def _discrete(n: int):
    return _spaces.Discrete(n) if HAVE_GYMNASIUM else Discrete(n)


class TabularEnv(_Base):
    """Online access to an MDP: s_{t+1} ~ p(. | s_t, a_t), reward r(s_t, a_t) (deterministic).

    mdp: a ``neurips26.nas.MDP``; seed: optional seed of the transition draws (``reset(seed=...)``
    reseeds); render_mode: None or ``"ansi"`` (``render()`` returns the current state as text).
    Observations are Python ints in ``Discrete(S)``; ``info`` is empty.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 4}

    def __init__(self, mdp: MDP, seed: int | None = None, render_mode: str | None = None):
        if not isinstance(mdp, MDP):
            raise TypeError(f"mdp must be an neurips26.nas.MDP, got {type(mdp).__name__}")
        if render_mode is not None and render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be None or one of {RENDER_MODES}, got {render_mode!r}")
        self.mdp = mdp
        self.render_mode = render_mode
        self.observation_space = _discrete(mdp.S)
        self.action_space = _discrete(mdp.A)
        cdf = np.cumsum(mdp.P, axis=2)
        cdf[:, :, -1] = 1.0
        cdf.setflags(write=False)
        self.cdf = cdf                                  # (S, A, S) next-state CDFs (the compiled loop)
        self._cdf = [[list(cdf[s, a]) for a in range(mdp.A)] for s in range(mdp.S)]
        self._r = mdp.r.tolist()
        self._np_random = np.random.default_rng(seed)
        self._s = mdp.s0

    # gymnasium.Env provides np_random (lazily seeded); keep a property so the plain base has it too
    @property
    def np_random(self) -> np.random.Generator:
        return self._np_random

    @np_random.setter
    def np_random(self, value: np.random.Generator) -> None:
        self._np_random = value

    @property
    def state(self) -> int:
        return self._s

    @state.setter
    def state(self, s: int) -> None:
        self._s = int(s)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._np_random = np.random.default_rng(seed)
            if HAVE_GYMNASIUM:
                self._np_random_seed = seed
        self._s = self.mdp.s0
        return self._s, {}

    def _draw(self, s: int, a: int) -> int:
        return bisect.bisect_right(self._cdf[s][a], self._np_random.random())

    def step(self, action):
        if isinstance(action, (bool, np.bool_)) or not isinstance(action, (int, np.integer)) \
                or not 0 <= int(action) < self.mdp.A:
            raise ValueError(f"action must be an int in [0, {self.mdp.A - 1}], got {action!r}")
        a = int(action)
        s = self._s
        s2 = self._draw(s, a)
        self._s = s2
        return s2, self._r[s][a], False, False, {}

    def render(self):
        if self.render_mode == "ansi":
            return f"state {self._s} of {self.mdp.S} ({self.mdp.name or 'MDP'})\n"
        return None

    def sample(self, state: int, action: int) -> tuple[int, float]:
        """Generative-model access (KLB-TS baseline): a draw of s' ~ p(.|s,a) and r(s,a)."""
        return self._draw(int(state), int(action)), self._r[state][action]
