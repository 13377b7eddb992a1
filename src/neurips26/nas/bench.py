"""Performance: oracle solve (DPP-compiled vs rebuilt cvxpy problem), sampling-loop steps/s,
stopping-check cost, number of solves (geometric vs fixed schedule), statistical efficiency, and
process-pool scale-out. Every timing goes through ``harness.bench`` (ours and the anchor in
interleaved rounds, medians; the statistic and n in each row's note). ``ctx.scale == "smoke"``
shrinks every row to seconds (one instance, few rounds, delta = 1e-2, two seeds).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import numpy as np

from neurips26.harness import BenchRow, RunContext
from neurips26.harness.bench import compare, stat_note, time_interleaved
from neurips26.harness.parallel import map_tasks
from neurips26.nas.agents import NaSConfig
from neurips26.nas.allocation import NavigationAllocator
from neurips26.nas.bound import bound_terms
from neurips26.nas.diagnostics import characteristic_time_estimate, instance_summary
from neurips26.nas.identify import identify
from neurips26.nas.instances import HARD_INSTANCES, QUICK_INSTANCES, build_instance, run_task
from neurips26.nas.kernels import HAVE_NUMBA
from neurips26.nas.mdp import Solution, random_mdp, solve_mdp, value_iteration
from neurips26.nas.stopping import stopping_statistic, threshold

SOLVE_MODES = ("parametric", "dpp", "rebuild")


@dataclass(frozen=True)
class BenchSizes:
    """How much each row measures (``quick``: the README's table; ``smoke``: seconds)."""

    solve_cases: int = 5          # the quick instances and three random MDPs
    solve_rounds: int = 15
    check_rounds: int = 200
    loop_rounds: int = 3
    delta: float = 1e-6
    tau_seeds: int = 10
    pool_tasks: int = 8
    pool_rounds: int = 3
    ray: bool = True              # the Ray row (starting a local Ray takes ~20 s)


SIZES = {"quick": BenchSizes(), "full": BenchSizes(),
         "smoke": BenchSizes(solve_cases=1, solve_rounds=3, check_rounds=5, loop_rounds=1, delta=1e-2,
                             tau_seeds=2, pool_tasks=2, pool_rounds=1, ray=False)}


def time_solves(mdp, rounds: int = 15):
    """Timings (``harness.bench.Timing``, seconds per solve) of the three allocator modes, interleaved,
    each compiled once first (amortised over a run); and the largest relative gap in U between them."""
    terms = bound_terms(mdp.P, mdp.r, mdp.gamma)
    allocs = {k: NavigationAllocator(mdp.S, mdp.A, mode=k) for k in SOLVE_MODES}
    first = {k: a.solve(mdp.P, terms) for k, a in allocs.items()}
    timings = time_interleaved(*(lambda a=a: a.solve(mdp.P, terms) for a in allocs.values()),
                               rounds=rounds, warmup=0)
    gap = max(abs(first[k].value - first["rebuild"].value) / first["rebuild"].value for k in SOLVE_MODES)
    return dict(zip(SOLVE_MODES, timings)), gap


def stop_check_fns(mdp):
    """The stopping check on an empirical model: policy iteration (ours) and value iteration (anchor)."""
    rng = np.random.default_rng(0)
    N_sas = rng.multinomial(200, np.ones(mdp.S) / mdp.S, size=(mdp.S, mdp.A)) + (mdp.P * 2000).astype(int)
    N_sa = N_sas.sum(axis=2)
    P = N_sas / N_sa[:, :, None]
    t = int(N_sa.sum())

    def check(sol):
        z, _ = stopping_statistic(bound_terms(P, mdp.r, mdp.gamma, sol=sol), N_sa, t)
        return z >= threshold(N_sa, 1e-3)

    def ours():
        return check(solve_mdp(P, mdp.r, mdp.gamma))

    def anchor():
        V, Q, pi = value_iteration(P, mdp.r, mdp.gamma, tol=1e-10)
        gaps = V[:, None] - Q
        gaps[np.arange(mdp.S), pi] = 0
        sub = np.ones_like(gaps, bool)
        sub[np.arange(mdp.S), pi] = False
        return check(Solution(V, Q, pi, np.maximum(gaps, 0), float(gaps[sub].min())))

    return ours, anchor


def _solve_rows(ctx: RunContext, sz: BenchSizes) -> list[BenchRow]:
    cases = [(f"{spec[1]}x{spec[2]} quick instance", build_instance(spec)) for spec in QUICK_INSTANCES]
    cases += [("5x2 random", random_mdp(5, 2, seed=1)), ("4x3 random", random_mdp(4, 3, seed=1)),
              ("8x3 random", random_mdp(8, 3, seed=1))]
    rows = []
    for name, mdp in ctx.track(cases[:sz.solve_cases], desc="solve timing"):
        t, gap = time_solves(mdp, sz.solve_rounds)
        p, d, r = (t[k].median * 1e3 for k in SOLVE_MODES)
        ctx.log(f"solve {name}: parametric {p:.2f} ms, dpp {d:.2f} ms, rebuild {r:.2f} ms")
        rows.append(BenchRow(f"oracle solve, {name} (S*A={mdp.S * mdp.A})", p, r,
                             "cvxpy problem rebuilt per call (MR-NaS solve_bound style)", "ms",
                             note=f"compiled once, affine data + direct Clarabel; U agrees within {gap:.1e} "
                                  f"rel.; target >= 5x; {stat_note(t['parametric'], t['rebuild'])}"))
        rows.append(BenchRow(f"oracle solve via cvxpy Problem.solve (DPP), {name}", d, r,
                             "cvxpy problem rebuilt per call", "ms",
                             note=f"same compiled problem, cvxpy's own parameter path; "
                                  f"{stat_note(t['dpp'], t['rebuild'])}"))
    return rows


def _loop_rows(mdp, sz: BenchSizes) -> list[BenchRow]:
    """Steps/s of the sampling loop without oracle solves and stop checks (identify's own timers):
    the compiled loop (``kernels.run_steps``) vs the Python loop on the same runs (same seeds, so
    the same trajectories: checked), interleaved rounds, the median over rounds of each."""
    rows = []
    for alg in ("nas", "uniform"):
        sps: dict[str, list] = {"compiled": [], "python": []}
        taus: dict[str, list] = {"compiled": [], "python": []}

        def run(loop: str, alg=alg, sps=sps, taus=taus):
            def go():
                r = identify(mdp, alg, sz.delta, seed=len(sps[loop]), K_s=20, loop=loop)
                sps[loop].append(r.steps / max(r.seconds - r.oracle_seconds - r.check_seconds, 1e-9))
                taus[loop].append((r.outcomes[0].tau, r.N_sas.tobytes()))
            return go

        identify(mdp, alg, 0.5, seed=0, K_s=20, loop="compiled")       # numba compiles / loads its cache
        time_interleaved(run("compiled"), run("python"), rounds=sz.loop_rounds, warmup=0)
        label = "NaS" if alg == "nas" else "uniform exploration"
        rows.append(BenchRow(f"sampling loop, {label} (excl. oracle solves and stop checks)",
                             statistics.median(sps["compiled"]), statistics.median(sps["python"]),
                             "Python loop (same runs, loop='python')", "steps/s", "higher",
                             f"{mdp.name}, delta {sz.delta:g}; compiled = numba kernel in chunks between "
                             f"stop checks and oracle updates (numba {'on' if HAVE_NUMBA else 'off'}"
                             f"); same taus and counts bit for bit: {taus['compiled'] == taus['python']}; "
                             f"target >= 10x; median of {len(sps['python'])} interleaved rounds"))
    return rows


def _efficiency_rows(ctx: RunContext, sz: BenchSizes) -> list[BenchRow]:
    """E[tau] of NaS vs uniform exploration, vs the information limit and vs U_o log(1/delta)."""
    rows, d = [], sz.delta
    for spec in QUICK_INSTANCES[:1] if sz.solve_cases == 1 else QUICK_INSTANCES + HARD_INSTANCES[:1]:
        m = build_instance(spec)
        info = instance_summary(m)
        seeds = range(sz.tau_seeds)
        tn = float(np.mean([identify(m, "nas", d, seed=s, K_s=20).outcomes[0].tau for s in seeds]))
        tu = float(np.mean([identify(m, "uniform", d, seed=s, K_s=20).outcomes[0].tau for s in seeds]))
        tg = float(np.mean([identify(m, "generative", d, seed=s, K_s=20).outcomes[0].tau for s in seeds]))
        n = f"mean over {sz.tau_seeds} seeds"
        rows.append(BenchRow(f"E[tau] NaS vs uniform, {m.name}, delta={d:g}", tn, tu, "uniform exploration",
                             "steps", "lower",
                             f"{n}; U(omega_u)/U_o = {info['U_uniform'] / info['U_o']:.2f}"))
        w_star = NavigationAllocator(m.S, m.A).solve(m.P, bound_terms(m.P, m.r, m.gamma)).omega
        est = characteristic_time_estimate(m, w_star)
        kl = d * math.log(d / (1 - d)) + (1 - d) * math.log((1 - d) / d)       # kl(delta, 1 - delta)
        name = f"E[tau] NaS vs information limit T(M, omega*) kl(delta, 1-delta), {m.name}"
        if est["alt_empty"]:
            rows.append(BenchRow(name, tn, None, "T(M, omega*_U) kl(delta, 1-delta)", "steps", "lower",
                                 "no alternative model found (Alt(M) empty on supp p): deterministic rewards "
                                 "already fix pi*, T = 0, so the optimality ratio is 0"))
        else:
            rows.append(BenchRow(name, tn, est["T"] * kl,
                                 "T(M, omega*_U) kl(delta, 1-delta) (SLSQP estimate)",
                                 "steps", "lower",
                                 f"{n}; T(M, omega*_U) ~ {est['T']:.3g} vs U_o = {info['U_o']:.3g} "
                                 f"(U_o/T = {info['U_o'] / est['T']:.3g})"))
        lower = info["U_o"] * math.log(1 / d)
        rows.append(BenchRow(f"E[tau] NaS vs U_o log(1/delta), {m.name}", tn, float(lower),
                             "U_o log(1/delta) (asymptotic reference)", "steps", "lower",
                             f"{n}; tau/(U_o log(1/delta)) = {tn / lower:.2f}; "
                             f"generative KLB-TS tau = {tg:.0f}"))
    return rows


def _pool_rows(sz: BenchSizes) -> list[BenchRow]:
    """The same NaS runs serially and on a 2-worker pool (``harness.parallel.map_tasks``); Ray vs
    processes."""
    base = dict(spec=QUICK_INSTANCES[0], gamma=0.5, ring_qs=(1.0,), alg="nas", deltas=(sz.delta,), K_s=20,
                t_max=2_000_000)
    tasks = [base | dict(seed=s) for s in range(sz.pool_tasks)]
    results: dict[str, list] = {}

    def run(backend: str):
        def go():
            out = map_tasks(run_task, tasks, backend=backend, workers=1 if backend == "serial" else 2,
                            progress=False)
            results[backend] = [r["tau"] for r in out]
        return go

    t_proc, t_ser = time_interleaved(run("process"), run("serial"), rounds=sz.pool_rounds, warmup=0)
    same = results["process"] == results["serial"]
    rows = [BenchRow(f"{sz.pool_tasks} NaS runs, 2-worker process pool vs serial", t_proc.median,
                     t_ser.median, "serial", "s",
                     note=f"identical taus: {same}; includes spawning the workers; shared 2-core machine; "
                          f"{stat_note(t_proc, t_ser, 's')}")]
    ray_name = f"{sz.pool_tasks} NaS runs, 2-worker process pool vs Ray"
    if not sz.ray:
        rows.append(BenchRow(ray_name, t_proc.median, None, "Ray (2 tasks in flight)", "s",
                             note="Ray not run at smoke scale (starting a local Ray takes ~20 s)"))
        return rows
    try:
        import ray  # the optional 'scale' extra
    except ImportError:
        rows.append(BenchRow(ray_name, t_proc.median, None, "Ray (2 tasks in flight)", "s",
                             note="Ray not installed: pip install 'neurips26[scale]'"))
        return rows
    was_running = ray.is_initialized()
    try:
        t_proc2, t_ray = time_interleaved(run("process"), run("ray"), rounds=sz.pool_rounds, warmup=0)
    finally:
        if not was_running and ray.is_initialized():
            ray.shutdown()
    rows.append(BenchRow(ray_name, t_proc2.median,
                         t_ray.median, "Ray (2 tasks in flight)", "s",
                         note=f"identical taus: {results['ray'] == results['serial']}; the first Ray round "
                              f"includes starting a local Ray; {stat_note(t_proc2, t_ray, 's')}"))
    return rows


def bench(ctx: RunContext) -> list[BenchRow]:
    sz = SIZES.get(ctx.scale, SIZES["quick"])
    rows = _solve_rows(ctx, sz)
    mdp = build_instance(QUICK_INSTANCES[0] if sz.solve_cases == 1 else QUICK_INSTANCES[1])
    rows += _loop_rows(mdp, sz)
    ours, anchor = stop_check_fns(mdp)
    rows.append(compare("stopping check (policy iteration on M_t + U + beta)", ours, anchor,
                        "same check with value iteration (tol 1e-10)", unit="us", rounds=sz.check_rounds,
                        note=f"{mdp.name}; K_s = 20 divides the per-step cost by 20"))
    # number of convex solves per run: geometric (lazy) vs fixed period K_omega = 100 (a count, not a time)
    geo = identify(mdp, "nas", sz.delta, seed=0, K_s=20)
    fix = identify(mdp, "nas", sz.delta, seed=0, K_s=20, nas=NaSConfig(schedule="fixed", K_omega=100))
    rows.append(BenchRow(f"oracle solves per run (delta = {sz.delta:g})", geo.n_oracle_solves,
                         fix.n_oracle_solves, "fixed period K_omega = 100", "solves", "lower",
                         f"one run (seed 0); tau geometric {geo.outcomes[0].tau} "
                         f"vs fixed {fix.outcomes[0].tau}"))
    rows += _efficiency_rows(ctx, sz)
    rows += _pool_rows(sz)
    return rows
