"""The optimizer's strategies against a constant-step FTRL learner (the compared "baselines").

The optimizer is clairvoyant: it knows A, h and eta, so it knows y_t before choosing x_t. Each strategy
is bound to a batch of games (``bind(ctx)``) and returns a policy with ``act(t, y) -> x (B, n)``; a
policy that does not look at y (open loop) also gives ``schedule(a, b) -> (b - a, B, n)``, which lets
the simulator compute the whole trajectory as one batched mirror map (the fast path).

1. ``FixedMaxMin``: x_t = x* (sweeping: surplus sigma_sweep / eta from the learner's slow exit).
2. ``Alternating(delta)``: x_t = x* + (-1)^{t+1} delta (odd rounds +delta), 1^T delta = 0,
   supp(delta) in supp(x*), x* +- delta >= 0 (ASSUMPTION: our reading of "alternating"). The drift is
   still c = A^T x*; each pair of rounds adds eta g^T H g + O(eta^2), g = A^T delta.
   ``SweepThenAlternate``: the same from round 1 with delta from ``search_delta`` -- the combined
   optimizer of the price-of-best-response study (sweep + alternation).
3. ``MyopicBestResponse``: x_t = e_{argmax_i (A y_t)_i} (one-step clairvoyant; ties to the lowest index).
4. ``AADConstant``: the best constant strategy in continuous time (Assos, Dagan, Daskalakis 2024):
   maximise J(x) = (Phi(0) - Phi(-eta T A^T x)) / eta over Delta_n, a concave problem (Phi convex);
   cvxpy ``log_sum_exp`` for the entropic learner, projected gradient ascent otherwise.
5. ``Uniform``: x_t = u_n.  ``Fixed(x)``: any constant x in the simplex.

Delta search (spec §3, pinned so reference values reproduce): r = default_rng(seed); for each of 256
draws d_S = r.standard_normal(|S|) on S = supp(x*) (x*_i > 1e-9, index order), d_S -= mean(d_S), d = 0
off S, d *= 0.99 min_{i in S} x*_i / |d_i|; keep the first d with the largest g^T H_inf g (H_inf is
P_O up to the regularizer's positive factor 1/phi''(1/k), so the search does not depend on h).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from neurips26.ftrl_surplus.games import GAP_TOL, GameSolution, check_simplex, solve_game
from neurips26.ftrl_surplus.learners import FTRL
from neurips26.ftrl_surplus.predictions import optimal_projector
from neurips26.ftrl_surplus.regularizers import Euclidean
from neurips26.harness.validation import check_array, check_choice, check_scalar


@dataclass
class PlayContext:
    """What a strategy binds to: the optimizer's model of each game and the learner it faces.

    model:     (B, n, m) the matrices the optimizer plans with (the true A unless payoffs are uncertain).
    solutions: the value LP of each model game.
    learner:   the FTRL learner; etas (B,) its step size per game.
    T:         the horizon.
    """

    model: np.ndarray
    solutions: list[GameSolution]
    learner: FTRL
    etas: np.ndarray
    T: int

    @property
    def B(self) -> int:
        return self.model.shape[0]

    @property
    def x_star(self) -> np.ndarray:
        return np.stack([s.x_star for s in self.solutions])


class Policy(ABC):
    """A strategy bound to a batch of games."""

    @abstractmethod
    def act(self, t: int, y: np.ndarray) -> np.ndarray:
        """x_t (B, n) for round t (1-based) given the learner's y_t (B, m)."""

    def schedule(self, a: int, b: int) -> np.ndarray | None:
        """x_t for t = a+1..b as (b - a, B, n) when the policy ignores y (open loop), else None."""
        return None


class FixedPolicy(Policy):
    def __init__(self, x: np.ndarray):
        self.x = x

    def act(self, t, y):
        return self.x

    def schedule(self, a, b):
        return np.broadcast_to(self.x, (b - a,) + self.x.shape)


class AlternatingPolicy(Policy):
    def __init__(self, x: np.ndarray, delta: np.ndarray):
        self.x, self.delta = x, delta

    def act(self, t, y):
        return self.x + self.delta if t % 2 == 1 else self.x - self.delta

    def schedule(self, a, b):
        sign = np.where(np.arange(a + 1, b + 1) % 2 == 1, 1.0, -1.0)
        return self.x[None] + sign[:, None, None] * self.delta[None]


class BestResponsePolicy(Policy):
    def __init__(self, model: np.ndarray):
        self.model = model

    def act(self, t, y):
        gain = np.matmul(self.model, y[:, :, None])[:, :, 0]
        x = np.zeros(gain.shape)
        x[np.arange(gain.shape[0]), np.argmax(gain, axis=1)] = 1.0
        return x


class Strategy(ABC):
    """An optimizer strategy; ``bind(ctx)`` returns the policy for a batch of games."""

    name: str = ""

    @abstractmethod
    def bind(self, ctx: PlayContext) -> Policy: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class FixedMaxMin(Strategy):
    """x_t = x* (the LP's max-min strategy): the sweeping optimizer."""

    name = "FixedMaxMin"

    def bind(self, ctx):
        return FixedPolicy(ctx.x_star)


class Uniform(Strategy):
    """x_t = u_n."""

    name = "Uniform"

    def bind(self, ctx):
        n = ctx.model.shape[1]
        return FixedPolicy(np.full((ctx.B, n), 1.0 / n))


class Fixed(Strategy):
    """x_t = x for a given x in the simplex (one x for all games, or one per game)."""

    name = "Fixed"

    def __init__(self, x):
        self.x = check_simplex(x, "x")

    def bind(self, ctx):
        n = ctx.model.shape[1]
        if self.x.shape[-1] != n:
            raise ValueError(f"x must have {n} entries (one per row action), got {self.x.shape[-1]}")
        return FixedPolicy(np.broadcast_to(self.x, (ctx.B, n)).copy())


def search_delta(A, solution: GameSolution | None = None, n_directions: int = 256, scale: float = 0.99,
                 seed: int = 0) -> tuple[np.ndarray, float]:
    """The spec's pinned delta search: (delta, g^T P_O g) of the best of ``n_directions`` random directions.

    delta = 0 (score 0) when x* is pure (alternation impossible).
    """
    sol = solution if solution is not None else solve_game(A)
    n_directions = check_scalar(n_directions, "n_directions", int, min=1)
    scale = check_scalar(scale, "scale", float, min=0.0, max=1.0, inclusive="right")
    r = np.random.default_rng(check_scalar(seed, "seed", int, min=0))
    S = np.flatnonzero(sol.x_star > GAP_TOL)
    best = np.zeros(sol.n)
    if S.size < 2:
        return best, 0.0
    P = optimal_projector(sol.optimal)
    # one (n_directions, |S|) draw is the same stream as n_directions draws of |S| in sequence
    D = r.standard_normal((n_directions, S.size))
    D -= D.mean(axis=1, keepdims=True)
    D *= scale * np.min(sol.x_star[S][None] / np.abs(D), axis=1, keepdims=True)
    G = D @ sol.A[S]                                   # g = A^T d for each direction
    scores = np.einsum("dm,mk,dk->d", G, P, G)
    i = int(np.argmax(scores))                         # the first of the largest
    best[S] = D[i]
    return best, float(scores[i])


def check_delta(delta: np.ndarray, x_star: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """delta with 1^T delta = 0 and x* +- delta >= 0 (tolerance ``tol``); else ValueError naming delta."""
    d = check_array(delta, "delta", ndim=1, dtype=float, shape=(x_star.size,))
    if abs(d.sum()) > tol:
        raise ValueError(f"delta must sum to 0 (a zero-sum direction), got sum {d.sum():.3g}")
    if np.any(x_star - np.abs(d) < -tol):
        i = int(np.argmin(x_star - np.abs(d)))
        raise ValueError(f"delta makes x* +- delta infeasible at row {i}: |delta_i| = {abs(d[i]):.3g} > "
                         f"x*_i = {x_star[i]:.3g}")
    return d


class Alternating(Strategy):
    """x_t = x* + (-1)^{t+1} delta. ``delta``: one for all games or one per game; None: ``search_delta``.

    ASSUMPTION (our reading of the paper's "alternating optimizer"): the x* +- delta scheme and the delta
    search are constructor arguments (``n_directions``, ``scale``, ``seed``).
    """

    name = "Alternating"

    def __init__(self, delta=None, n_directions: int = 256, scale: float = 0.99, seed: int = 0):
        self.delta = None if delta is None else check_array(delta, "delta", ndim=(1, 2), dtype=float)
        self.n_directions = check_scalar(n_directions, "n_directions", int, min=1)
        self.scale = check_scalar(scale, "scale", float, min=0.0, max=1.0, inclusive="right")
        self.seed = check_scalar(seed, "seed", int, min=0)

    def deltas(self, ctx: PlayContext) -> np.ndarray:
        if self.delta is None:
            return np.stack([search_delta(s.A, s, self.n_directions, self.scale, self.seed)[0]
                             for s in ctx.solutions])
        d = np.broadcast_to(self.delta, (ctx.B, ctx.model.shape[1]))
        return np.stack([check_delta(d[b], s.x_star) for b, s in enumerate(ctx.solutions)])

    def bind(self, ctx):
        return AlternatingPolicy(ctx.x_star, self.deltas(ctx))


class SweepThenAlternate(Alternating):
    """The combined optimizer: drift x* (sweeping) and alternation +-delta from round 1, delta searched."""

    name = "SweepThenAlternate"

    def __init__(self, n_directions: int = 256, scale: float = 0.99, seed: int = 0):
        super().__init__(None, n_directions, scale, seed)


#: the combined optimizer of the price-of-best-response study (spec §3, E4)
CombinedOptimizer = SweepThenAlternate


class MyopicBestResponse(Strategy):
    """x_t = e_{argmax_i (A y_t)_i}: best response to the learner's current (known) strategy."""

    name = "MyopicBestResponse"

    def bind(self, ctx):
        return BestResponsePolicy(ctx.model)


class AADConstant(Strategy):
    """The optimal constant strategy in continuous time: argmax_x (Phi(0) - Phi(-eta T A^T x)) / eta.

    method: ``cvxpy`` (entropic only: log-sum-exp), ``pga`` (projected gradient ascent, any h) or
    ``auto`` (cvxpy for entropic when installed, else pga).
    """

    name = "AADConstant"

    def __init__(self, method: str = "auto", iters: int = 400):
        self.method = check_choice(method, "method", ("auto", "cvxpy", "pga"))
        self.iters = check_scalar(iters, "iters", int, min=1)

    def bind(self, ctx):
        if self.method == "pga" or ctx.learner.reg.name != "entropic":
            return FixedPolicy(aad_constant_batch(ctx.model, ctx.learner.reg, ctx.etas, ctx.T, self.iters,
                                                  x0=ctx.x_star))
        xs = [aad_constant(s.A, ctx.learner.reg, float(e), ctx.T, self.method, self.iters)
              for s, e in zip(ctx.solutions, ctx.etas)]
        return FixedPolicy(np.stack(xs))


def continuous_payoff(A, reg, eta: float, T: int, x) -> np.ndarray:
    """J(x) = (Phi(0) - Phi(-eta T A^T x)) / eta: the continuous-time payoff of constant x (rows of x)."""
    X = np.atleast_2d(np.asarray(x, dtype=np.float64))
    c = X @ np.asarray(A, dtype=np.float64)
    phi0 = float(np.atleast_1d(reg.potential(np.zeros((1, c.shape[1]))))[0])
    return (phi0 - np.atleast_1d(reg.potential(-eta * T * c))) / eta


def aad_constant(A, reg, eta: float, T: int, method: str = "auto", iters: int = 400) -> np.ndarray:
    """argmax over Delta_n of the continuous-time payoff J(x) of a constant strategy (concave)."""
    A = np.asarray(A, dtype=np.float64)
    if method in ("auto", "cvxpy") and reg.name == "entropic":
        try:
            import cvxpy as cp
        except ImportError:
            if method == "cvxpy":
                raise ImportError("AADConstant(method='cvxpy') needs cvxpy: pip install cvxpy") from None
        else:
            x = cp.Variable(A.shape[0], nonneg=True)
            prob = cp.Problem(cp.Maximize(-cp.log_sum_exp(-eta * T * (A.T @ x))), [cp.sum(x) == 1])
            try:
                prob.solve()
                if x.value is not None:
                    v = np.maximum(np.asarray(x.value, dtype=np.float64), 0.0)
                    return v / v.sum()
            except cp.error.SolverError:  # pragma: no cover - fall back to pga
                pass
    elif method == "cvxpy":
        raise ValueError(f"method 'cvxpy' is for the entropic learner only, got {reg.name}")
    return _pga(A, reg, eta, T, iters)


def _pga(A, reg, eta, T, iters):
    return aad_constant_batch(A[None], reg, np.array([eta]), T, iters)[0]


def aad_constant_batch(As, reg, etas, T: int, iters: int = 400, x0=None) -> np.ndarray:
    """Projected gradient ascent on J(x)/T for a batch of games (B, n, m), one eta each: (B, n).

    Starts from each game's max-min x*; the step of each game grows 1.5x on an ascent and halves on a
    failure (so J never decreases); d(J/T)/dx = A grad Phi(-eta T A^T x).
    """
    As = np.asarray(As, dtype=np.float64)
    etas = np.broadcast_to(np.asarray(etas, dtype=np.float64), (As.shape[0],))
    proj = Euclidean()
    scale = (etas * T)[:, None]
    phi0 = float(np.atleast_1d(reg.potential(np.zeros((1, As.shape[2]))))[0])

    def value(x):  # J(x) / T
        c = np.einsum("bn,bnm->bm", x, As)
        return (phi0 - reg.potential(-scale * c)) / (etas * T)

    x = np.stack([solve_game(A).x_star for A in As]) if x0 is None else np.array(x0, dtype=np.float64)
    f = value(x)
    step = 1.0 / (etas * T + 1.0)
    for _ in range(iters):
        y = reg.map_unchecked(-scale * np.einsum("bn,bnm->bm", x, As))
        grad = np.einsum("bnm,bm->bn", As, y)
        cand = proj.map_unchecked(x + step[:, None] * grad)
        fc = value(cand)
        ok = fc >= f
        x = np.where(ok[:, None], cand, x)
        f = np.where(ok, fc, f)
        step = np.where(ok, step * 1.5, step * 0.5)
        if np.all(step < 1e-14):
            break
    return x


STRATEGIES = {"FixedMaxMin": FixedMaxMin, "Alternating": Alternating,
              "SweepThenAlternate": SweepThenAlternate, "MyopicBestResponse": MyopicBestResponse,
              "AADConstant": AADConstant, "Uniform": Uniform}
