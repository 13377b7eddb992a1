"""Source-level sketches (spec section 2) and their server-side pooling (section 3).

A sketch holds, for each observed modality ``m`` and class ``c``: the count ``n_s(m,c)``, the prototype
``mu_s(m,c)`` (mean embedding) and the dispersion ``v_s(m,c) = mean ||z - mu||^2``; for each pair
``m < m'``: the co-observed count ``n_s(m,m',c)`` and the mean paired cosine ``kappa_s(m,m',c)``.
Its size is ``|O_s| C (d + 2) + |O_s|(|O_s| - 1) C`` floats, independent of the data size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neurips26.harness.validation import check_array, check_scalar


@dataclass
class Sketch:
    modalities: tuple[int, ...]
    counts: np.ndarray        # (K, C)
    proto: np.ndarray         # (K, C, d)
    disp: np.ndarray          # (K, C)
    pair_counts: np.ndarray   # (K, K, C) symmetric
    pair_cons: np.ndarray     # (K, K, C) symmetric

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.proto.shape

    def n_floats(self) -> int:
        """Floats uploaded: only the source's own modalities and pairs."""
        k = len(self.modalities)
        K, C, d = self.proto.shape
        return k * C * (d + 2) + k * (k - 1) * C


def build_sketch(z: list[np.ndarray], mask: np.ndarray, cls: np.ndarray, modalities: tuple[int, ...],
                 n_classes: int, noise_std: float = 0.0, rng: np.random.Generator | None = None) -> Sketch:
    """The sketch of one source from its embeddings ``z[m]`` (n, d), ``mask`` (n, K), class ``cls``
    (label or confident pseudo-label, -1 = not counted). ``noise_std`` adds Gaussian noise (privacy)."""
    noise_std = check_scalar(noise_std, "noise_std", float, min=0)
    mask = check_array(mask, "mask", ndim=2, dtype=bool)
    cls = check_array(cls, "cls", ndim=1, dtype=int, shape=(len(mask),))
    K, C = mask.shape[1], check_scalar(n_classes, "n_classes", int, min=1)
    if np.any((cls < -1) | (cls >= C)):
        raise ValueError(f"cls must be in [0, {C}) or -1")
    d = next(np.asarray(z[m]).shape[1] for m in modalities)
    counts = np.zeros((K, C))
    proto = np.zeros((K, C, d))
    disp = np.zeros((K, C))
    pc = np.zeros((K, K, C))
    pk = np.zeros((K, K, C))
    counted = cls >= 0
    for m in modalities:
        zm = np.asarray(z[m], dtype=float)
        sel = mask[:, m] & counted
        c_sel, z_sel = cls[sel], zm[sel]
        k = np.bincount(c_sel, minlength=C).astype(float)             # n_s(m, c)
        sums = np.eye(C)[c_sel].T @ z_sel                              # sum of z^m per class
        counts[m] = k
        proto[m] = sums / np.maximum(k, 1)[:, None]                   # mu_s(m, c) = mean z^m
        dev = np.sum((z_sel - proto[m, c_sel]) ** 2, axis=1)          # ||z - mu_s(m, c)||^2
        disp[m] = np.bincount(c_sel, weights=dev, minlength=C) / np.maximum(k, 1)   # v_s(m, c)
    for i, m in enumerate(modalities):
        for m2 in modalities[i + 1:]:
            za, zb = np.asarray(z[m], float), np.asarray(z[m2], float)
            norms = np.linalg.norm(za, axis=1) * np.linalg.norm(zb, axis=1)
            cos = np.sum(za * zb, axis=1) / np.maximum(norms, 1e-12)
            sel = mask[:, m] & mask[:, m2] & counted
            k = np.bincount(cls[sel], minlength=C).astype(float)      # n_s(m, m', c)
            kap = np.bincount(cls[sel], weights=cos[sel], minlength=C) / np.maximum(k, 1)  # kappa_s
            pc[m, m2] = pc[m2, m] = k
            pk[m, m2] = pk[m2, m] = kap
    if noise_std > 0:
        rng = rng if rng is not None else np.random.default_rng()
        has = counts > 0
        proto = proto + has[..., None] * rng.normal(scale=noise_std, size=proto.shape)
        noise = rng.normal(scale=noise_std, size=pk.shape)
        pk = np.where(pc > 0, pk + (noise + noise.transpose(1, 0, 2)) / 2, 0.0)
    return Sketch(tuple(modalities), counts, proto, disp, pc, pk)


@dataclass
class Pooled:
    """Server-side pooled statistics (spec section 3)."""

    n: np.ndarray          # (K, C)
    mu: np.ndarray         # (K, C, d)
    v: np.ndarray          # (K, C) count-weighted within-source dispersion
    b: np.ndarray          # (K, C) between-source dispersion
    n_pair: np.ndarray     # (K, K, C)
    kappa: np.ndarray      # (K, K, C)
    delta: np.ndarray      # (K,) median inter-class prototype distance


def pool(sketches: list[Sketch]) -> Pooled:
    """Pool sketches: count-weighted prototypes, within/between dispersion, pair counts and consistency."""
    if not sketches:
        raise ValueError("sketches is empty: pooling needs at least one source's sketch")
    shape = sketches[0].shape
    for i, s in enumerate(sketches):
        if s.shape != shape:
            raise ValueError(f"sketches[{i}] has shape (K, C, d) = {s.shape}, expected {shape} "
                             f"(mismatched d or C)")
    n = sum(s.counts for s in sketches)
    safe = np.maximum(n, 1e-300)
    mu = sum(s.counts[..., None] * s.proto for s in sketches) / safe[..., None]
    v = sum(s.counts * s.disp for s in sketches) / safe
    b = sum(s.counts * np.sum((s.proto - mu) ** 2, axis=-1) for s in sketches) / safe
    npair = sum(s.pair_counts for s in sketches)
    kappa = sum(s.pair_counts * s.pair_cons for s in sketches) / np.maximum(npair, 1e-300)
    K = shape[0]
    delta = np.ones(K)
    for m in range(K):
        obs = np.flatnonzero(n[m] > 0)
        if len(obs) > 1:
            P = mu[m, obs]
            dist = np.linalg.norm(P[:, None] - P[None], axis=-1)
            delta[m] = max(float(np.median(dist[np.triu_indices(len(obs), 1)])), 1e-6)
    return Pooled(n, mu, v, b, npair, kappa, delta)
