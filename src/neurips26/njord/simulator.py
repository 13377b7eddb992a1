"""The testbed ocean: a 1.5-layer reduced-gravity shallow-water model with a temperature tracer.

Wind-driven double gyre on a beta-plane, Arakawa C-grid (eta at centres, u/v at west/south faces)
with an irregular seeded land mask, vector-invariant momentum ``(f+zeta) x u`` with Bernoulli
``g' eta + KE``, flux-form continuity ``d eta/dt = -div((H+eta) u)`` (so the wet-cell sum of eta is
conserved), first-order upwind tracer relaxed to ``25 - 15 y/L``, AR(1) unresolved wind noise, SSP-RK3.
State in float64, batched over trajectories (axis 0). Spec §"Data" (njord.md).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
from scipy import ndimage

from neurips26.harness.cache import cache_dir as harness_cache_dir
from neurips26.harness.validation import check_array, check_scalar

G = 9.81
DAY = 86400.0
CHANNELS = ("ssh", "u", "v", "T")


def make_mask(n: int, seed: int = 0, land_fraction: float = 0.18, smooth: float = 4.0) -> np.ndarray:
    """Seeded wet mask (True = ocean): smoothed noise thresholded, closed walls, largest wet basin."""
    n = check_scalar(n, "n", int, min=8)
    land_fraction = check_scalar(land_fraction, "land_fraction", float, min=0.0, max=0.9)
    field = ndimage.gaussian_filter(np.random.default_rng(seed).standard_normal((n, n)), smooth, mode="wrap")
    wet = field < np.quantile(field, 1.0 - land_fraction)
    wet[0, :] = wet[-1, :] = wet[:, 0] = wet[:, -1] = False
    lab, k = ndimage.label(wet)
    if k == 0:
        raise ValueError("mask has no wet cells")
    sizes = ndimage.sum(wet, lab, index=np.arange(1, k + 1))
    return lab == (1 + int(np.argmax(sizes)))


def check_mask(mask, allow_multi_basin: bool = False) -> np.ndarray:
    """A boolean wet mask with closed walls and (unless allowed) one connected basin."""
    mask = check_array(mask, "mask", ndim=2, dtype=bool)
    if not mask.any():
        raise ValueError("mask has no wet cells")
    if mask[0].any() or mask[-1].any() or mask[:, 0].any() or mask[:, -1].any():
        raise ValueError("mask must be land on its outer rows/columns (closed walls)")
    if not allow_multi_basin and ndimage.label(mask)[1] > 1:
        raise ValueError("mask has several disconnected basins (pass allow_multi_basin=True)")
    return mask


@dataclass(frozen=True)
class OceanConfig:
    n: int = 32
    dx: float = 30e3
    H: float = 500.0
    gprime: float = 0.02
    f0: float = 7e-5
    beta: float = 2e-11
    rho: float = 1025.0
    tau0: float = 0.15
    A: float = 150.0
    r: float = 1e-7
    noise_tau_days: float = 3.0
    noise_sigma: float = 4.0
    namp_spinup: float = 0.025
    namp: float = 0.075
    relax_days: float = 30.0
    mask_seed: int = 0
    # open boundary (spec §7, "Regional boundaries"): a sponge of the wet cells within sponge_width
    # cells of the open side(s), relaxed towards the exterior state (rest: eta = u = v = 0, T = T*)
    # at rate gamma(d) = (1 - d / sponge_width)^2 / sponge_days, d = distance (cells) from the side's
    # outermost wet row/column. 0 = the closed basin (the default testbed).
    sponge_width: int = 0
    sponge_days: float = 1.0
    sponge_sides: str = "e"  # any of "n", "s", "e", "w"

    @property
    def dt(self) -> float:
        c = np.sqrt(self.gprime * self.H)
        return DAY / np.ceil(DAY / (0.4 * self.dx / c))

    @property
    def steps_per_day(self) -> int:
        return int(round(DAY / self.dt))


class ShallowWater:
    """Batched reduced-gravity shallow water. ``state`` = dict eta, u, v, T, xi of shape (B, n, n)."""

    def __init__(self, cfg: OceanConfig, mask: np.ndarray | None = None):
        self.cfg = cfg
        self.mask = check_mask(make_mask(cfg.n, cfg.mask_seed) if mask is None else mask)
        n, dx = self.mask.shape[0], cfg.dx
        if self.mask.shape != (n, n):
            raise ValueError(f"mask must be square, got shape {self.mask.shape}")
        w = self.mask
        self.umask = (w & np.roll(w, 1, axis=1)).astype(float)  # west face of (j, i)
        self.vmask = (w & np.roll(w, 1, axis=0)).astype(float)  # south face of (j, i)
        self.wet = w.astype(float)
        L = n * dx
        y_c = (np.arange(n) + 0.5) * dx
        y_f = np.arange(n) * dx
        self.L = L
        self.y_c = y_c
        self.f_u = (cfg.f0 + cfg.beta * y_c)[:, None] * np.ones((1, n))
        self.f_v = (cfg.f0 + cfg.beta * y_f)[:, None] * np.ones((1, n))
        self.tau_pattern = -cfg.tau0 * np.cos(2 * np.pi * y_c / L)[:, None] * np.ones((1, n))
        self.T_star = (25.0 - 15.0 * y_c / L)[:, None] * np.ones((1, n))
        self.a = float(np.exp(-cfg.dt / (cfg.noise_tau_days * DAY)))
        imp = np.zeros((4 * int(cfg.noise_sigma) * 2 + 1,) * 2)
        imp[imp.shape[0] // 2, imp.shape[1] // 2] = 1.0
        self._noise_norm = float(np.sqrt((ndimage.gaussian_filter(imp, cfg.noise_sigma) ** 2).sum()))
        self.sponge = sponge_rate(cfg, self.mask)
        self.sponge_u = 0.5 * (self.sponge + np.roll(self.sponge, 1, axis=1)) * self.umask
        self.sponge_v = 0.5 * (self.sponge + np.roll(self.sponge, 1, axis=0)) * self.vmask
        # wet west / east / south / north neighbour of each cell (the upwind tracer's wall rule)
        self._wet_nb = tuple(np.roll(w, k, axis=a) for k, a in ((1, 1), (-1, 1), (1, 0), (-1, 0)))

    # --- pieces ---------------------------------------------------------------------------------
    def smooth_noise(self, rng: np.random.Generator, B: int) -> np.ndarray:
        w = rng.standard_normal((B,) + self.mask.shape)
        return (
            ndimage.gaussian_filter(w, (0, self.cfg.noise_sigma, self.cfg.noise_sigma), mode="wrap")
            / self._noise_norm
        )

    def wind(self, day: float, xi: np.ndarray, namp: float) -> np.ndarray:
        seasonal = 1.0 + 0.2 * np.sin(2 * np.pi * day / 365.0)
        return self.tau_pattern * seasonal + namp * xi

    def rest_state(self, B: int, rng: np.random.Generator) -> dict:
        n = self.mask.shape[0]
        z = np.zeros((B, n, n))
        return dict(
            eta=z.copy(),
            u=z.copy(),
            v=z.copy(),
            T=np.broadcast_to(self.T_star * self.wet, z.shape).copy(),
            xi=self.smooth_noise(rng, B),
        )

    def tendency(self, eta, u, v, T, taux):
        """Tendencies of (eta, u, v, T). The periodic shifts are ``_shift`` (== ``np.roll`` by +-1,
        bit for bit, ~4x cheaper on these small arrays), each computed once; the mask shifts are
        precomputed in ``__init__``."""
        c, dx = self.cfg, self.cfg.dx
        h = c.H + eta
        hu = 0.5 * (h + _shift(h, 1, 2))
        hv = 0.5 * (h + _shift(h, 1, 1))
        U, V = hu * u, hv * v
        deta = -((_shift(U, -1, 2) - U) + (_shift(V, -1, 1) - V)) / dx * self.wet
        u_xp, u_ym = _shift(u, -1, 2), _shift(u, 1, 1)  # u at (j, i+1), (j-1, i)
        v_yp, v_xm = _shift(v, -1, 1), _shift(v, 1, 2)  # v at (j+1, i), (j, i-1)
        # relative vorticity at the south-west corner of (j, i)
        zeta = ((v - v_xm) - (u - u_ym)) / dx
        ke = 0.25 * (u**2 + u_xp**2 + v**2 + v_yp**2)
        Bn = c.gprime * eta + ke
        zeta_u = 0.5 * (zeta + _shift(zeta, -1, 1))
        zeta_v = 0.5 * (zeta + _shift(zeta, -1, 2))
        v_u = 0.25 * (v + v_yp + v_xm + _shift(v_yp, 1, 2))
        u_v = 0.25 * (u + u_xp + u_ym + _shift(u_xp, 1, 1))
        lap_u = (u_ym + _shift(u, -1, 1) + _shift(u, 1, 2) + u_xp - 4 * u) / dx**2
        lap_v = (_shift(v, 1, 1) + v_yp + v_xm + _shift(v, -1, 2) - 4 * v) / dx**2
        tau_u = 0.5 * (taux + _shift(taux, 1, 2))
        du = (
            (self.f_u + zeta_u) * v_u
            - (Bn - _shift(Bn, 1, 2)) / dx
            + tau_u / (c.rho * hu)
            - c.r * u
            + c.A * lap_u
        ) * self.umask
        dv = (
            -(self.f_v + zeta_v) * u_v - (Bn - _shift(Bn, 1, 1)) / dx - c.r * v + c.A * lap_v
        ) * self.vmask
        uc = 0.5 * (u + u_xp)
        vc = 0.5 * (v + v_yp)
        ww, we, ws, wn = self._wet_nb
        Tw = np.where(ww, _shift(T, 1, 2), T)
        Te = np.where(we, _shift(T, -1, 2), T)
        Ts = np.where(ws, _shift(T, 1, 1), T)
        Tn = np.where(wn, _shift(T, -1, 1), T)
        adv = (
            np.where(uc > 0, uc * (T - Tw), uc * (Te - T)) + np.where(vc > 0, vc * (T - Ts), vc * (Tn - T))
        ) / dx
        dT = (-adv + (self.T_star - T) / (c.relax_days * DAY)) * self.wet
        if c.sponge_width:  # relaxation towards the exterior (rest) state: d q/dt += -gamma (q - q_b)
            deta = deta - self.sponge * eta
            du = du - self.sponge_u * u
            dv = dv - self.sponge_v * v
            dT = dT + self.sponge * (self.T_star - T)
        return deta, du, dv, dT

    def step(self, s: dict, day: float, rng: np.random.Generator, namp: float) -> dict:
        """One SSP-RK3 step (noise held fixed within the step), then the AR(1) noise update."""
        dt = self.cfg.dt
        taux = self.wind(day, s["xi"], namp)
        y0 = (s["eta"], s["u"], s["v"], s["T"])
        k = self.tendency(*y0, taux)
        y1 = tuple(a + dt * b for a, b in zip(y0, k))
        k = self.tendency(*y1, taux)
        y2 = tuple(0.75 * a + 0.25 * (b + dt * d) for a, b, d in zip(y0, y1, k))
        k = self.tendency(*y2, taux)
        y3 = tuple(a / 3 + 2 / 3 * (b + dt * d) for a, b, d in zip(y0, y2, k))
        xi = self.a * s["xi"] + np.sqrt(1 - self.a**2) * self.smooth_noise(rng, s["xi"].shape[0])
        return dict(eta=y3[0], u=y3[1], v=y3[2], T=y3[3], xi=xi)

    def run_days(
        self, s: dict, day0: float, days: int, rng: np.random.Generator, namp: float, record: bool = False
    ):
        """Advance ``days`` model days; with ``record`` also return daily snapshots (B, days, n, n, 4)."""
        spd = self.cfg.steps_per_day
        snaps = []
        for d in range(days):
            for k in range(spd):
                s = self.step(s, day0 + d + k / spd, rng, namp)
            if record:
                snaps.append(self.observe(s))
            if not all(np.isfinite(s[x]).all() for x in ("eta", "u", "v", "T")):
                raise FloatingPointError(f"simulation blew up at day {day0 + d}")
        return (s, np.stack(snaps, axis=1)) if record else s

    def observe(self, s: dict) -> np.ndarray:
        """(SSH, u, v, T) at cell centres, (B, n, n, 4)."""
        ssh = self.cfg.gprime / G * s["eta"]
        uc = 0.5 * (s["u"] + np.roll(s["u"], -1, axis=2))
        vc = 0.5 * (s["v"] + np.roll(s["v"], -1, axis=1))
        return np.stack([ssh, uc, vc, s["T"]], axis=-1) * self.wet[..., None]


def _shift(a: np.ndarray, k: int, axis: int) -> np.ndarray:
    """``np.roll(a, k, axis)`` for ``k`` = +-1 (periodic shift by one cell), by slice copies."""
    out = np.empty_like(a)
    lo = [slice(None)] * a.ndim
    hi = [slice(None)] * a.ndim
    if k == 1:
        lo[axis], hi[axis] = slice(1, None), slice(None, -1)
        out[tuple(lo)] = a[tuple(hi)]
        lo[axis], hi[axis] = slice(0, 1), slice(-1, None)
    elif k == -1:
        lo[axis], hi[axis] = slice(None, -1), slice(1, None)
        out[tuple(lo)] = a[tuple(hi)]
        lo[axis], hi[axis] = slice(-1, None), slice(0, 1)
    else:
        raise ValueError(f"shift must be +1 or -1, got {k}")
    out[tuple(lo)] = a[tuple(hi)]
    return out


def sponge_rate(cfg: OceanConfig, mask: np.ndarray) -> np.ndarray:
    """Sponge relaxation rate (1/s) per cell: ``gamma = (1 - d / w)^2 / (sponge_days * DAY)`` on wet
    cells with ``d < w`` cells from the open side (``d = 0`` at the side's outermost wet row/column);
    zero elsewhere and everywhere for ``sponge_width = 0``."""
    w = check_scalar(cfg.sponge_width, "sponge_width", int, min=0)
    rate = np.zeros(mask.shape)
    if w == 0:
        return rate
    check_scalar(cfg.sponge_days, "sponge_days", float, min=0.0, inclusive="neither")
    sides = cfg.sponge_sides
    if not sides or set(sides) - set("nsew"):
        raise ValueError(f"sponge_sides must be letters of 'nsew', got {sides!r}")
    rows, cols = np.nonzero(mask)
    jj, ii = np.indices(mask.shape)
    dist = np.full(mask.shape, np.inf)
    for side in sides:
        d = {"e": cols.max() - ii, "w": ii - cols.min(), "n": rows.max() - jj, "s": jj - rows.min()}[side]
        dist = np.minimum(dist, d)
    rate = np.where(dist < w, (1.0 - dist / w) ** 2, 0.0) / (cfg.sponge_days * DAY)
    return rate * mask


def boundary_strip(cfg: OceanConfig, mask: np.ndarray, width: int | None = None) -> np.ndarray:
    """(N,) float32 in {0, 1} over the wet cells (``to_nodes`` order): 1 on the open boundary strip,
    the wet cells within ``width`` cells (default ``sponge_width``) of the open side(s) -- the strip
    whose states a regional model takes from the truth (spec §7); 0 on the interior."""
    w = check_scalar(cfg.sponge_width if width is None else width, "sponge_width" if width is None else "width",
                     int, min=1)
    zone = sponge_rate(replace(cfg, sponge_width=w), mask) > 0
    return zone[mask].astype(np.float32)


@dataclass(frozen=True)
class DataConfig:
    ocean: OceanConfig = OceanConfig()
    spinup_days: int = 240
    days: int = 240
    n_traj: int = 2
    seed: int = 0


def cache_dir() -> Path:
    return harness_cache_dir("njord")


def config_hash(cfg: DataConfig) -> str:
    d = asdict(cfg)
    if not cfg.ocean.sponge_width:  # closed basin: the hash (and cache) of the configs before the sponge
        for k in ("sponge_width", "sponge_days", "sponge_sides"):
            d["ocean"].pop(k)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def generate(cfg: DataConfig, cache: bool = True) -> dict:
    """Spin up, then record ``days`` daily snapshots for ``n_traj`` noise seeds on one mask.

    Returns dict(fields (n_traj, days, n, n, 4), mask, final state of every trajectory, day0,
    and the full model state at every recorded day for the oracle: ``states`` (n_traj, days, 5, n, n)).
    Cached as ``<cache>/<config-hash>.npz``.
    """
    check_scalar(cfg.days, "days", int, min=2)
    check_scalar(cfg.spinup_days, "spinup_days", int, min=0)
    path = cache_dir() / f"{config_hash(cfg)}.npz"
    if cache and path.exists():
        z = np.load(path)
        return {k: z[k] for k in z.files}
    sim = ShallowWater(cfg.ocean)
    rng = np.random.default_rng(cfg.seed)
    s = sim.rest_state(cfg.n_traj, rng)
    s = sim.run_days(s, 0.0, cfg.spinup_days, rng, cfg.ocean.namp_spinup)
    spd = sim.cfg.steps_per_day
    fields, states = [], []
    day0 = cfg.spinup_days
    for d in range(cfg.days):
        for k in range(spd):
            s = sim.step(s, day0 + d + k / spd, rng, cfg.ocean.namp)
        fields.append(sim.observe(s))
        states.append(np.stack([s[x] for x in ("eta", "u", "v", "T", "xi")], axis=1))
    out = dict(
        fields=np.stack(fields, 1).astype(np.float32),
        states=np.stack(states, 1),
        mask=sim.mask,
        day0=np.array(day0 + 1.0),
    )
    if not np.isfinite(out["fields"]).all():
        raise FloatingPointError("simulation produced non-finite fields")
    if cache:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")     # seeds generating the same data side by side
        np.savez_compressed(tmp, **out)
        os.replace(tmp, path)
    return out


def oracle_ensemble(
    cfg: OceanConfig, mask: np.ndarray, state: np.ndarray, day: float, leads: int, members: int, seed: int = 0
) -> np.ndarray:
    """The oracle: re-run the simulator from the true state (eta, u, v, T, xi) at ``day`` with fresh
    noise innovations per member. ``state`` (5, n, n); returns (members, leads, n, n, 4) daily fields."""
    check_scalar(members, "members", int, min=1)
    check_scalar(leads, "leads", int, min=1)
    sim = ShallowWater(cfg, mask)
    s = {k: np.repeat(state[i][None], members, axis=0) for i, k in enumerate(("eta", "u", "v", "T", "xi"))}
    _, snaps = sim.run_days(s, day, leads, np.random.default_rng(seed), cfg.namp, record=True)
    return snaps
