"""ObsBench: sources that each see some modalities and classes, with blind relations and noisy pairs.

The generator of the spec ("Reproduction / Data"): K = 3 modalities (image, text, audio) mapped
from an 8-d latent, ``x^m = 2 tanh(A_m z + b_m) + N(0, 0.3^2)``; modality ``m`` is *blind* to the
classes ``B_m`` (their ``x^m`` comes from the partner class ``pi(c) = (c + 3) mod C``); marked sources
corrupt the second modality's class with probability ``eta`` (drawn from the source's other classes);
per-source domain shift ``x <- (I + delta R) x + delta t``. The instance noise of the latent is shared
by a sample's modalities, so co-observed pairs correspond at instance level (**ASSUMPTION**).

``alignable(m, m', c)`` (ground truth, evaluation only): ``c`` not blind on either side, and the pooled
mismatch rate of the ``(m, m', c)`` training pairs < 0.3.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from neurips26.harness.validation import check_array, check_scalar

MODALITIES = ("image", "text", "audio")
DIMS = (48, 32, 24)
LATENT = 8
MISMATCH_LIMIT = 0.3   # alignable(r) needs a pooled pair mismatch rate below this


@dataclass(frozen=True)
class SourceSpec:
    """One source: modality indices, class coverage, training size and its heterogeneity."""

    modalities: tuple[int, ...]
    classes: tuple[int, ...] | None = None   # None: all classes
    n: int = 400
    label_fraction: float = 1.0
    eta: float = 0.0                         # noisy-correspondence rate
    delta: float = 0.0                       # domain-shift strength
    missing: float = 0.1                     # per-modality missing rate (>= 1 modality kept)
    class_weights: tuple[float, ...] | None = None  # sampling weights over ``classes`` (None: uniform)


@dataclass
class Split:
    """Arrays of one split of one source. ``x[m]`` is zero where ``mask[:, m]`` is False."""

    x: list[np.ndarray]
    mask: np.ndarray          # (n, K) bool
    y: np.ndarray             # (n,) true class
    y_obs: np.ndarray         # (n,) label or -1 (unlabelled)
    mismatch: np.ndarray      # (n,) bool: the second modality came from another class

    def __len__(self) -> int:
        return len(self.y)


@dataclass
class Source:
    spec: SourceSpec
    train: Split
    val: Split
    test: Split


@dataclass
class ObsBench:
    """The generated benchmark: sources, unimodal tests and the ground truth."""

    sources: list[Source]
    n_classes: int
    dims: tuple[int, ...]
    blind: tuple[frozenset[int], ...]
    unimodal_test: list[tuple[np.ndarray, np.ndarray]]   # per modality: (x, y) over all classes
    alignable: np.ndarray = field(default=None)          # (K, K, C) bool, symmetric, evaluation only
    unimodal_val: list[tuple[np.ndarray, np.ndarray]] | None = None  # like unimodal_test, for tuning only

    @property
    def n_modalities(self) -> int:
        return len(self.dims)

    def fingerprint(self) -> str:
        h = hashlib.sha256()
        for s in self.sources:
            for sp in (s.train, s.val, s.test):
                for a in (*sp.x, sp.mask, sp.y, sp.y_obs):
                    h.update(np.ascontiguousarray(a).tobytes())
        return h.hexdigest()


QUICK_LABEL_FRACTION = 0.1   # the spec's label fraction of the label-scarce sources s2, s3
QUICK_ETA = 0.6              # the spec's noisy-correspondence rate of s1
SCARCE_LABEL_FRACTION = 0.02  # s2/s3 label fraction where the validation sweep shows the phenomenon


def quick_sources(label_fraction: float = QUICK_LABEL_FRACTION, eta: float = QUICK_ETA,
                  scale: float = 1.0) -> list[SourceSpec]:
    """The quick layout of the spec (s0..s4); ``label_fraction`` of s2/s3, ``eta`` of s1, sizes x ``scale``."""
    label_fraction = check_scalar(label_fraction, "label_fraction", float, min=0, max=1)
    eta = check_scalar(eta, "eta", float, min=0, max=1)
    scale = check_scalar(scale, "scale", float, min=0, inclusive="neither")
    n = lambda k: max(int(k * scale), 20)  # noqa: E731
    return [SourceSpec((0, 1), None, n(400)),
            SourceSpec((0, 1), tuple(range(6)), n(300), eta=eta),
            SourceSpec((0, 2), None, n(400), label_fraction=label_fraction),
            SourceSpec((1, 2), tuple(range(3, 12)), n(300), label_fraction=label_fraction, delta=0.5),
            SourceSpec((0,), None, n(200))]


def quick_blind() -> tuple[frozenset[int], ...]:
    return (frozenset({1, 7}), frozenset({4, 10}), frozenset({2, 8}))


FULL_ETAS = (0.0, 0.3, 0.6)              # the spec's full-scale noisy-correspondence grid
FULL_LABEL_FRACTIONS = (0.05, 0.1, 0.3)  # ... and label-fraction grid (label-scarce sources)


def full_blind(n_classes: int = 24) -> tuple[frozenset[int], ...]:
    """The quick blind sets repeated with period 12 (**ASSUMPTION**: the spec names only the quick ones)."""
    n_classes = check_scalar(n_classes, "n_classes", int, min=12)
    return tuple(frozenset(c for c in range(n_classes) if c % 12 in b) for b in quick_blind())


def full_sources(seed: int = 0, n_sources: int = 12, n_classes: int = 24, eta: float = 0.3,
                 label_fraction: float = 0.1, alpha: float = 0.5, n: int = 300, delta: float = 0.5,
                 noisy_prob: float = 1 / 3, shift_prob: float = 0.25) -> list[SourceSpec]:
    """The full-scale layout: ``n_sources`` random sources (deterministic per ``seed``).

    Availability: a uniformly random non-empty modality subset per source, redrawn until every modality
    is seen by >= 2 sources and every modality pair co-observed by >= 1. Classes: proportions
    ``p ~ Dirichlet(alpha 1_C)``; a source covers the classes with expected count ``n p_c >= 1`` (>= 2
    classes) with weights ``p``. Noise: each multi-modal source is marked with probability
    ``noisy_prob`` and gets ``eta``. Labels: sources observing audio (the label-scarce modality) get
    ``label_fraction``, the others 100%. Shift: ``delta`` with probability ``shift_prob``.
    (**ASSUMPTION**: the spec fixes C, S, the Dirichlet(0.5) coverage and the two grids only.)
    """
    seed = check_scalar(seed, "seed", int, min=0)
    n_sources = check_scalar(n_sources, "n_sources", int, min=3)
    n_classes = check_scalar(n_classes, "n_classes", int, min=2)
    eta = check_scalar(eta, "eta", float, min=0, max=1)
    label_fraction = check_scalar(label_fraction, "label_fraction", float, min=0, max=1)
    alpha = check_scalar(alpha, "alpha", float, min=0, inclusive="neither")
    n = check_scalar(n, "n", int, min=2)
    delta = check_scalar(delta, "delta", float, min=0)
    noisy_prob = check_scalar(noisy_prob, "noisy_prob", float, min=0, max=1)
    shift_prob = check_scalar(shift_prob, "shift_prob", float, min=0, max=1)
    rng = np.random.default_rng([seed, 24])
    K = len(MODALITIES)
    subsets = [tuple(m for m in range(K) if (b >> m) & 1) for b in range(1, 2 ** K)]
    pairs = [(a, b) for a in range(K) for b in range(a + 1, K)]
    while True:
        mods = [subsets[i] for i in rng.integers(len(subsets), size=n_sources)]
        seen = [sum(m in s for s in mods) for m in range(K)]
        if min(seen) >= 2 and all(any(a in s and b in s for s in mods) for a, b in pairs):
            break
    out = []
    for s in mods:
        p = rng.dirichlet(np.full(n_classes, alpha))
        keep = np.flatnonzero(n * p >= 1)
        if len(keep) < 2:
            keep = np.sort(np.argsort(p)[-2:])
        multi = len(s) > 1
        out.append(SourceSpec(
            s, tuple(int(c) for c in keep), n,
            label_fraction=label_fraction if 2 in s else 1.0,
            eta=eta if multi and rng.random() < noisy_prob else 0.0,
            delta=delta if rng.random() < shift_prob else 0.0,
            class_weights=tuple(float(x) for x in p[keep])))
    return out


class _World:
    """The per-seed fixed parameters: class means, modality maps, blind sets, source shifts."""

    def __init__(self, rng: np.random.Generator, n_classes: int, dims: tuple[int, ...],
                 blind: tuple[frozenset[int], ...], regime: str, d_vlm: int):
        self.C, self.dims, self.blind, self.regime = n_classes, dims, blind, regime
        self.mu = rng.normal(size=(n_classes, LATENT)) * 2.5
        self.A = [rng.normal(scale=np.sqrt(1 / 8), size=(dm, LATENT)) for dm in dims]
        self.b = [rng.normal(scale=0.5, size=dm) for dm in dims]
        self.G = rng.normal(scale=np.sqrt(1 / 8), size=(d_vlm, LATENT))

    def out_dims(self) -> tuple[int, ...]:
        return self.dims if self.regime == "encoder" else (self.G.shape[0],) * len(self.dims)

    def partner(self, c: np.ndarray, m: int) -> np.ndarray:
        blind = np.isin(c, list(self.blind[m]))
        return np.where(blind, (c + 3) % self.C, c)

    def emit(self, cls: np.ndarray, eps: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
        z = self.mu[self.partner(cls, m)] + eps
        if self.regime == "vlm":   # frozen pre-aligned features, one shared G for all modalities
            f = z @ self.G.T + rng.normal(scale=0.1, size=(len(z), self.G.shape[0]))
            return f / np.linalg.norm(f, axis=1, keepdims=True)
        return 2 * np.tanh(z @ self.A[m].T + self.b[m]) + rng.normal(scale=0.3, size=(len(z), self.dims[m]))


def _split(world: _World, spec: SourceSpec, n: int, shift, rng: np.random.Generator) -> Split:
    K, C = len(world.dims), world.C
    classes = np.array(spec.classes if spec.classes is not None else range(C))
    if spec.class_weights is None:
        y = rng.choice(classes, size=n)
    else:
        w = np.asarray(spec.class_weights, float)
        y = rng.choice(classes, size=n, p=w / w.sum())
    eps = rng.normal(size=(n, LATENT))
    mask = np.zeros((n, K), bool)
    mask[:, list(spec.modalities)] = True
    if len(spec.modalities) > 1 and spec.missing > 0:
        drop = rng.random((n, len(spec.modalities))) < spec.missing
        empty = drop.all(axis=1)
        keep = rng.integers(len(spec.modalities), size=n)
        drop[empty, keep[empty]] = False
        mask[:, list(spec.modalities)] &= ~drop
    mismatch = np.zeros(n, bool)
    cls_m = {m: y.copy() for m in spec.modalities}
    if spec.eta > 0 and len(spec.modalities) > 1 and len(classes) > 1:
        second = spec.modalities[1]
        mismatch = rng.random(n) < spec.eta
        other = rng.integers(len(classes) - 1, size=n)
        pos = np.searchsorted(classes, y)
        wrong = classes[np.where(other >= pos, other + 1, other)]
        cls_m[second] = np.where(mismatch, wrong, y)
    dims = world.out_dims()
    x = [np.zeros((n, dm)) for dm in dims]
    for m in spec.modalities:
        xm = world.emit(cls_m[m], eps, m, rng)
        if spec.delta > 0:
            R, t = shift[m]
            xm = xm @ (np.eye(dims[m]) + spec.delta * R).T + spec.delta * t
        x[m] = np.where(mask[:, m:m + 1], xm, 0.0)
    labelled = rng.random(n) < spec.label_fraction
    return Split(x, mask, y, np.where(labelled, y, -1), mismatch)


def make_obsbench(seed: int = 0, sources: list[SourceSpec] | None = None, n_classes: int = 12,
                  blind: tuple[frozenset[int], ...] | None = None, regime: str = "encoder",
                  d_vlm: int = 32, unimodal_per_class: int = 60, dims: tuple[int, ...] = DIMS) -> ObsBench:
    """Generate ObsBench (deterministic per ``seed``); ``regime`` "encoder" or "vlm" (frozen features)."""
    seed = check_scalar(seed, "seed", int, min=0)
    n_classes = check_scalar(n_classes, "n_classes", int, min=2)
    unimodal_per_class = check_scalar(unimodal_per_class, "unimodal_per_class", int, min=1)
    if regime not in ("encoder", "vlm"):
        raise ValueError(f"regime must be 'encoder' or 'vlm', got {regime!r}")
    sources = quick_sources() if sources is None else list(sources)
    blind = quick_blind() if blind is None else tuple(frozenset(b) for b in blind)
    K = len(dims)
    if len(blind) != K:
        raise ValueError(f"blind must give one class set per modality ({K}), got {len(blind)}")
    if not sources:
        raise ValueError("sources must name at least one source")
    for i, s in enumerate(sources):
        _check_spec(s, i, K, n_classes)
    rng = np.random.default_rng(seed)
    world = _World(rng, n_classes, tuple(dims), blind, regime, d_vlm)
    out_dims = world.out_dims()
    built = []
    for s in sources:
        shift = {m: (rng.normal(scale=np.sqrt(1 / out_dims[m]), size=(out_dims[m], out_dims[m])),
                     rng.normal(size=out_dims[m])) for m in s.modalities}
        tr = _split(world, s, s.n, shift, rng)
        va = _split(world, s, max(s.n // 2, 1), shift, rng)
        te = _split(world, s, max(s.n // 2, 1), shift, rng)
        built.append(Source(s, tr, va, te))
    uni = []
    for m in range(K):
        y = np.repeat(np.arange(n_classes), unimodal_per_class)
        uni.append((world.emit(y, rng.normal(size=(len(y), LATENT)), m, rng), y))
    val = []   # drawn after the test sets, so a seed's training and test data do not depend on it
    for m in range(K):
        y = np.repeat(np.arange(n_classes), unimodal_per_class)
        val.append((world.emit(y, rng.normal(size=(len(y), LATENT)), m, rng), y))
    bench = ObsBench(built, n_classes, out_dims, blind, uni, unimodal_val=val)
    bench.alignable = ground_truth_alignable(bench)
    return bench


def _check_spec(s: SourceSpec, i: int, K: int, C: int) -> None:
    name = f"sources[{i}]"
    if not s.modalities:
        raise ValueError(f"{name}.modalities is empty: a source must observe at least one modality")
    if any(not (0 <= m < K) for m in s.modalities) or len(set(s.modalities)) != len(s.modalities):
        raise ValueError(f"{name}.modalities must be distinct indices in [0, {K}), got {s.modalities}")
    if s.classes is not None and (not s.classes or any(not (0 <= c < C) for c in s.classes)):
        raise ValueError(f"{name}.classes must be non-empty indices in [0, {C}), got {s.classes}")
    if s.class_weights is not None:
        n_cls = C if s.classes is None else len(s.classes)
        w = check_array(s.class_weights, f"{name}.class_weights", shape=(n_cls,))
        if not (np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0):
            raise ValueError(f"{name}.class_weights must be finite, >= 0 and not all zero")
    check_scalar(s.n, f"{name}.n", int, min=1)
    check_scalar(s.label_fraction, f"{name}.label_fraction", float, min=0, max=1)
    check_scalar(s.eta, f"{name}.eta", float, min=0, max=1)
    check_scalar(s.delta, f"{name}.delta", float, min=0)
    check_scalar(s.missing, f"{name}.missing", float, min=0, max=1, inclusive="left")


def ground_truth_alignable(bench: ObsBench) -> np.ndarray:
    """``alignable[m, m', c]``: not blind on either side and pooled pair mismatch rate < 0.3."""
    K, C = bench.n_modalities, bench.n_classes
    pairs = np.zeros((K, K, C))
    bad = np.zeros((K, K, C))
    for s in bench.sources:
        tr = s.train
        for m in range(K):
            for m2 in range(m + 1, K):
                both = tr.mask[:, m] & tr.mask[:, m2]
                pairs[m, m2] += np.bincount(tr.y[both], minlength=C)
                bad[m, m2] += np.bincount(tr.y[both & tr.mismatch], minlength=C)
    rate = np.divide(bad, pairs, out=np.zeros_like(bad), where=pairs > 0)
    out = np.zeros((K, K, C), bool)
    for m in range(K):
        for m2 in range(m + 1, K):
            for c in range(C):
                ok = c not in bench.blind[m] and c not in bench.blind[m2] and rate[m, m2, c] < MISMATCH_LIMIT
                out[m, m2, c] = out[m2, m, c] = ok
    return out


def validate_split(split: Split, dims: tuple[int, ...], n_classes: int, name: str = "split") -> None:
    """Refuse a split with wrong feature dims, NaN/inf, bad labels or a sample with no modality."""
    K = len(dims)
    mask = check_array(split.mask, f"{name}.mask", ndim=2, dtype=bool, shape=(None, K))
    n = len(mask)
    if len(split.x) != K:
        raise ValueError(f"{name}.x must hold {K} modality arrays, got {len(split.x)}")
    for m, xm in enumerate(split.x):
        check_array(xm, f"{name}.x[{m}]", ndim=2, dtype=float, shape=(n, dims[m]))
    y = check_array(split.y_obs, f"{name}.y_obs", ndim=1, dtype=int, shape=(n,))
    if np.any((y < -1) | (y >= n_classes)):
        raise ValueError(f"{name}.y_obs must be in [0, {n_classes}) or -1 (unlabelled)")
    if np.any(~mask.any(axis=1)):
        raise ValueError(f"{name}.mask: {int((~mask.any(axis=1)).sum())} sample(s) observe no modality")
