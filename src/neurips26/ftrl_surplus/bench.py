"""Benchmarks, side by side through ``harness.bench.compare`` (interleaved rounds, medians):

  * the batched simulator (``play(..., engine="loop")``, B = 256 games of 8 x 8, one batched mirror map
    and GEMV per round) vs the naive per-game Python loop (``naive_play``, the anchor), in game-rounds/s,
    per regularizer. Targets: entropic >= 1 M game-rounds/s and >= 20x; Tsallis / log-barrier >= 10x.
  * the value LP: our ``solve_game`` (one HiGHS LP) vs ``nashpy.Game.linear_program`` (two LPs, one per
    player, by design) at 10 x 10 and 100 x 100; target >= 1.5x.
  * achieved GFLOP/s of the simulator's GEMV part (2 B n m flops per round) vs numpy's matmul peak here.
"""

from __future__ import annotations

import time

import numpy as np

from neurips26.ftrl_surplus.games import solve_game
from neurips26.ftrl_surplus.learners import FTRL
from neurips26.ftrl_surplus.regularizers import regularizer
from neurips26.ftrl_surplus.simulator import naive_play, play
from neurips26.ftrl_surplus.strategies import FixedMaxMin, MyopicBestResponse
from neurips26.harness import BenchRow, RunContext
from neurips26.harness.bench import compare

SIZES = {"smoke": {"B": 16, "T": 40, "loop_games": 2, "lp_games": 2, "rounds": 3},
         "quick": {"B": 256, "T": 200, "loop_games": 8, "lp_games": 10, "rounds": 5}}
REGS = ("entropic", "euclidean", "tsallis-0.5", "tsallis-1.5", "log_barrier")


def _best_response(A):
    def x_fn(t, y):
        x = np.zeros(A.shape[0])
        x[int(np.argmax(A @ y))] = 1.0
        return x
    return x_fn


def simulator_rows(size: dict, rounds: int) -> list[BenchRow]:
    """Batched simulator vs the per-game loop, the same adaptive strategy (myopic best response)."""
    rng = np.random.default_rng(0)
    B, T, n_loop = size["B"], size["T"], size["loop_games"]
    As = rng.uniform(-1, 1, (B, 8, 8))
    sols = [solve_game(A) for A in As]
    rows = []
    for name in REGS:
        reg = regularizer(name)
        learner = FTRL(reg, 0.1)

        def ours():
            play(As, learner, MyopicBestResponse(), T, engine="loop", solutions=sols)

        def anchor():  # n_loop games, one at a time (scaled to game-rounds below)
            for A in As[:n_loop]:
                naive_play(A, reg, 0.1, _best_response(A), T)

        row = compare(f"simulate {name}, B={B} games 8x8, T={T}, myopic best response", ours, anchor,
                      "naive per-game Python loop", unit="game-rounds/s", work=B * T, rounds=rounds)
        # the anchor did n_loop games, not B: rescale its throughput to its own work
        anchor_rate = None if row.anchor is None else row.anchor * n_loop / B
        target = ">= 1e6 game-rounds/s and >= 20x" if name == "entropic" else ">= 10x"
        rows.append(BenchRow(row.name, row.ours, anchor_rate, row.anchor_name, row.unit, "higher",
                             f"target {target}; anchor ran {n_loop} games; {row.note}"))
    # the open-loop fast path (a fixed max-min optimizer: the whole trajectory as one batched map)
    reg = regularizer("entropic")
    learner = FTRL(reg, 0.1)
    T_open = 10 * T

    def ours_open():
        play(As, learner, FixedMaxMin(), T_open, engine="open_loop", solutions=sols)

    def anchor_open():
        for A, s in zip(As[:n_loop], sols[:n_loop]):
            naive_play(A, reg, 0.1, lambda t, y, x=s.x_star: x, T_open)

    row = compare(f"simulate entropic open-loop fast path, B={B} games 8x8, T={T_open}, FixedMaxMin",
                  ours_open, anchor_open, "naive per-game Python loop", unit="game-rounds/s",
                  work=B * T_open, rounds=rounds)
    rows.append(BenchRow(row.name, row.ours, None if row.anchor is None else row.anchor * n_loop / B,
                         row.anchor_name, row.unit, "higher", f"anchor ran {n_loop} games; {row.note}"))
    return rows


def lp_rows(size: dict, rounds: int) -> list[BenchRow]:
    try:
        import nashpy
    except ImportError:
        nashpy = None
    rows = []
    for n in (10, 100):
        As = np.random.default_rng(n).uniform(-1, 1, (size["lp_games"], n, n))

        def ours():
            for A in As:
                solve_game(A)

        anchor = None
        if nashpy is not None:
            def anchor():
                for A in As:
                    nashpy.Game(A).linear_program()

        rows.append(compare(f"value LP {n}x{n} ({len(As)} games)", ours, anchor, "nashpy linear_program",
                            unit="ms", rounds=rounds, missing="nashpy not installed (pip install nashpy)",
                            note="nashpy solves two LPs (one per player) by design; target >= 1.5x"))
    return rows


def gemv_row(size: dict, rounds: int) -> BenchRow:
    """GFLOP/s of the batched GEMV l_t = A^T x_t (B x 8 x 8) vs numpy's matmul peak (1024^2 GEMM)."""
    rng = np.random.default_rng(1)
    B = size["B"]
    At = rng.uniform(-1, 1, (B, 8, 8))
    x = rng.uniform(0, 1, (B, 8, 1))
    reps = 200
    M = rng.standard_normal((512, 512))

    def ours():
        for _ in range(reps):
            np.matmul(At, x)

    def peak():
        M @ M

    row = compare(f"GEMV part, B={B} x (8x8) per round", ours, peak, "numpy matmul 512^2 (peak)",
                  unit="ms", rounds=rounds)
    ours_gflops = 2 * B * 64 * reps / (row.ours / 1e3) / 1e9
    peak_gflops = 2 * 512 ** 3 / (row.anchor / 1e3) / 1e9
    return BenchRow(row.name, ours_gflops, peak_gflops, row.anchor_name, "GFLOP/s", "higher",
                    "ratio = fraction of the machine's matmul peak the per-round GEMVs reach; " + row.note)


def bench(ctx: RunContext) -> list[BenchRow]:
    size = SIZES["smoke" if ctx.scale == "smoke" else "quick"]
    rounds = size["rounds"]
    t0 = time.perf_counter()
    rows = simulator_rows(size, rounds) + lp_rows(size, rounds) + [gemv_row(size, rounds)]
    ctx.log(f"ftrl_surplus bench: {len(rows)} rows in {time.perf_counter() - t0:.1f} s")
    return rows
