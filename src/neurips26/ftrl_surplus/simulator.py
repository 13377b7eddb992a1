"""Play an optimizer strategy against an FTRL learner, batched over games and step sizes.

One round t = 1..T (the rules the simulator implements):
  1. the learner plays y_t = grad Phi(-eta L_{t-1}) (optimistic: -eta (L_{t-1} + l_{t-1})), y_1 = u_m;
  2. the optimizer, knowing y_t (clairvoyant; under ``observe="model"`` its own prediction of y_t from
     its model matrix and the noise-free losses), plays x_t;
  3. the optimizer earns u_t = x_t^T A y_t and the surplus s_t = u_t - v (v: the true value);
  4. the learner's loss vector is l_t = A^T x_t (+ xi_t ~ N(0, sigma_l^2 I) when ``loss_noise`` > 0; bandit
     feedback: the importance-weighted estimate of one sampled entry), added to L.
S_T = sum_t s_t. The learner's regret sum_t <l_t, y_t> - min_j sum_t l_{t,j} uses the true losses.

Two engines compute the same rounds: ``loop`` (the reference, one batched mirror map per round) and
``open_loop`` (for strategies that ignore y_t: the whole loss sequence is known, so L_{t-1} is a cumulative
sum and all T rounds are one batched mirror call, in chunks); ``auto`` picks open_loop when the policy
has a schedule and feedback is full. Long loss sums are re-centred (L -= min L, shift invariance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neurips26.ftrl_surplus.games import GameSolution, check_payoff, solve_game
from neurips26.ftrl_surplus.learners import FTRL
from neurips26.ftrl_surplus.strategies import PlayContext, Strategy
from neurips26.harness.validation import check_array, check_choice, check_scalar

ENGINES = ("auto", "loop", "open_loop")
OBSERVE = ("exact", "model")
CHUNK = 4096
CHUNK_ROWS = 32_768
RECENTRE_EVERY = 1024


@dataclass
class PlayResult:
    """Per-round curves and totals of one batched play (B games)."""

    payoff: np.ndarray     # (B, T) u_t = x_t^T A y_t
    value: np.ndarray      # (B,) the true game values v
    regret: np.ndarray     # (B,) learner regret against the true losses
    dual_sq: np.ndarray    # (B,) sum_t ||l_t||_*^2 of the true losses (for the FTRL bound)
    final_y: np.ndarray    # (B, m) y_{T+1}
    engine: str

    @property
    def surplus(self) -> np.ndarray:
        """s_t = u_t - v, (B, T)."""
        return self.payoff - self.value[:, None]

    @property
    def cumulative(self) -> np.ndarray:
        """S_t, (B, T)."""
        return np.cumsum(self.surplus, axis=1)

    @property
    def total(self) -> np.ndarray:
        """S_T = sum_t u_t - T v, (B,)."""
        return self.payoff.sum(axis=1) - self.payoff.shape[1] * self.value


def _batch(A) -> np.ndarray:
    arr = check_array(A, "A", ndim=(2, 3), dtype=float, min_size=1)
    if 0 in arr.shape:
        raise ValueError(f"A must be non-empty, got shape {arr.shape}")
    if arr.ndim == 2:
        check_payoff(arr)
        arr = arr[None]
    return arr


def play(A, learner: FTRL, strategy: Strategy, T: int, *, engine: str = "auto", model=None,
         solutions: "list[GameSolution] | None" = None, loss_noise: float = 0.0, observe: str = "exact",
         seed: int = 0) -> PlayResult:
    """Play ``strategy`` against ``learner`` for T rounds on A ((n, m) or a batch (B, n, m)).

    The batch is the broadcast of the games and the learner's step sizes: one game with an eta grid of
    E values plays E runs, B games with one eta play B runs, B games with B etas pair them.
    model:      the optimizer's planning matrices (default A); solutions: their LPs (computed if None).
    loss_noise: sigma_l, std of Gaussian noise on the learner's losses; ``seed`` seeds it (and bandit draws).
    observe:    ``exact`` (the optimizer sees y_t) or ``model`` (it predicts y_t from ``model``).
    """
    if not isinstance(learner, FTRL):
        raise TypeError(f"learner must be an FTRL, got {type(learner).__name__}")
    if not isinstance(strategy, Strategy):
        raise TypeError(f"strategy must be a Strategy, got {type(strategy).__name__}")
    T = check_scalar(T, "T", int, min=1)
    check_choice(engine, "engine", ENGINES)
    check_choice(observe, "observe", OBSERVE)
    sigma_l = check_scalar(loss_noise, "loss_noise", float, min=0.0)
    seed = check_scalar(seed, "seed", int, min=0)
    games = _batch(A)
    plan = games if model is None else _batch(model)
    if plan.shape[1:] != games.shape[1:]:
        raise ValueError(f"model must have the games' shape {games.shape[1:]}, got {plan.shape[1:]}")
    etas = learner.etas
    B = np.broadcast_shapes((games.shape[0],), (plan.shape[0],), (etas.size,))[0]
    games = np.broadcast_to(games, (B,) + games.shape[1:])
    plan = np.broadcast_to(plan, (B,) + plan.shape[1:])
    etas = np.broadcast_to(etas, (B,)).astype(np.float64)
    if solutions is None:
        uniq = [solve_game(g) for g in _unique(plan)]
        solutions = [uniq[i] for i in _index(plan)]
    elif len(solutions) != B:
        raise ValueError(f"solutions must hold one GameSolution per game ({B}), got {len(solutions)}")
    if model is None:  # the optimizer's model is the true game: its LPs give the true values
        value = np.array([s.value for s in solutions])
    else:
        true_sol = [solve_game(g) for g in _unique(games)]
        value = np.array([true_sol[i].value for i in _index(games)])
    ctx = PlayContext(model=np.ascontiguousarray(plan), solutions=list(solutions), learner=learner,
                      etas=etas, T=T)
    policy = strategy.bind(ctx)
    rng = np.random.default_rng(seed)
    open_ok = policy.schedule(0, 1) is not None and learner.feedback == "full"
    if engine == "open_loop" and not open_ok:
        raise ValueError("engine 'open_loop' needs a strategy that ignores y_t and full feedback")
    chosen = "open_loop" if (engine == "open_loop" or (engine == "auto" and open_ok)) else "loop"
    run = _open_loop if chosen == "open_loop" else _loop
    payoff, regret, dual_sq, y_last = run(np.ascontiguousarray(games), ctx, policy, learner, etas, T,
                                          sigma_l, rng, observe)
    return PlayResult(payoff=payoff, value=value, regret=regret, dual_sq=dual_sq, final_y=y_last,
                      engine=chosen)


def _unique(games: np.ndarray) -> list[np.ndarray]:
    """The distinct games of a broadcast batch (an eta grid repeats one game: solve its LP once)."""
    if games.shape[0] > 1 and games.strides[0] == 0:
        return [games[0]]
    return list(games)


def _index(games: np.ndarray) -> range | list[int]:
    if games.shape[0] > 1 and games.strides[0] == 0:
        return [0] * games.shape[0]
    return range(games.shape[0])


def _loop(games, ctx, policy, learner, etas, T, sigma_l, rng, observe):
    """The reference engine: one batched mirror map and one batched GEMV per round."""
    B, n, m = games.shape
    reg = learner.reg
    L = np.zeros((B, m))          # the learner's (re-centred) cumulative loss estimate
    L_true = np.zeros((B, m))     # true cumulative losses (regret)
    L_model = np.zeros((B, m))    # the optimizer's model of L (observe="model")
    last = np.zeros((B, m))
    payoff = np.empty((B, T))
    dual_sq = np.zeros(B)
    cum_loss = np.zeros(B)
    At = np.ascontiguousarray(np.swapaxes(games, 1, 2))  # (B, m, n)
    Mt = np.ascontiguousarray(np.swapaxes(ctx.model, 1, 2))
    rows = np.arange(B)
    for t in range(1, T + 1):
        y = learner.respond(L, last, etas)
        seen = y if observe == "exact" else learner.respond(L_model, last, etas)
        x = policy.act(t, seen)
        loss = np.matmul(At, x[:, :, None])[:, :, 0]   # l_t = A^T x_t
        u = np.einsum("bm,bm->b", loss, y)
        payoff[:, t - 1] = u
        cum_loss += u
        L_true += loss
        dual_sq += reg.dual_norm_sq(loss)
        if observe == "model":
            L_model += np.matmul(Mt, x[:, :, None])[:, :, 0]
        fed = loss + sigma_l * rng.standard_normal((B, m)) if sigma_l > 0 else loss
        if learner.feedback == "bandit":
            j = (rng.random(B)[:, None] > np.cumsum(y, axis=1)).sum(axis=1).clip(max=m - 1)
            est = np.zeros((B, m))
            est[rows, j] = fed[rows, j] / y[rows, j]
            fed = est
        L += fed
        last = fed
        if t % RECENTRE_EVERY == 0:
            shift = L.min(axis=1, keepdims=True)
            L -= shift
            if observe == "model":
                L_model -= shift
    y_last = learner.respond(L, last, etas)
    return payoff, cum_loss - L_true.min(axis=1), dual_sq, y_last


def _open_loop(games, ctx, policy, learner, etas, T, sigma_l, rng, observe):
    """Fast path for open-loop policies: L_{t-1} by cumulative sums, y_t for a chunk of rounds at once."""
    B, n, m = games.shape
    reg = learner.reg
    payoff = np.empty((B, T))
    L = np.zeros((B, m))
    L_true = np.zeros((B, m))
    last = np.zeros((B, m))
    dual_sq = np.zeros(B)
    chunk = max(1, min(CHUNK, CHUNK_ROWS // B))  # keep a chunk's (rounds x games) block cache-sized
    for a in range(0, T, chunk):
        b = min(T, a + chunk)
        X = policy.schedule(a, b)                           # (c, B, n)
        loss = np.matmul(np.swapaxes(X, 0, 1), games).swapaxes(0, 1)  # (c, B, m) l_t = A^T x_t
        fed = loss + sigma_l * rng.standard_normal(loss.shape) if sigma_l > 0 else loss
        before = L[None] + np.cumsum(fed, axis=0) - fed    # L_{t-1}
        if learner.optimistic:
            prev = np.concatenate([last[None], fed[:-1]], axis=0)
            before = before + prev
        theta = -etas[None, :, None] * before
        y = reg.map_unchecked(theta.reshape(-1, m)).reshape(theta.shape)
        if learner.feedback == "bandit" and learner.explore > 0:  # pragma: no cover - loop only
            y = (1.0 - learner.explore) * y + learner.explore / m
        payoff[:, a:b] = (loss * y).sum(axis=-1).T
        L_true += loss.sum(axis=0)
        dual_sq += reg.dual_norm_sq(loss).sum(axis=0)
        L = L + fed.sum(axis=0)
        last = fed[-1]
        L -= L.min(axis=1, keepdims=True)
    y_last = learner.respond(L, last, etas)
    return payoff, payoff.sum(axis=1) - L_true.min(axis=1), dual_sq, y_last


def naive_play(A, reg, eta: float, x_fn, T: int) -> float:
    """The anchor of the bench: one game, one round at a time in plain Python/numpy, no batching.

    x_fn(t, y) -> x. Returns sum_t x_t^T A y_t.
    """
    A = np.asarray(A, dtype=np.float64)
    L = np.zeros(A.shape[1])
    total = 0.0
    for t in range(1, T + 1):
        y = reg.map_unchecked((-eta * L)[None])[0]
        x = x_fn(t, y)
        loss = A.T @ x
        total += float(loss @ y)
        L += loss
    return total
