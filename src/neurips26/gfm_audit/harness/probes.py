"""Probes on frozen features, samplers and the statistics of a row.

Linear probe (multinomial logistic regression, sklearn's scaling)::

    L(W, b) = (1/n) sum_i CE(W x_i + b, y_i) + ||W||^2 / (2 C n)        (intercept b unpenalised)

minimised by torch L-BFGS with strong-Wolfe line search. ``sweep`` fits C over ``C_GRID`` (40
log-spaced values 1e-6 ... 1e4) in ascending order, each fit warm-started from the previous one,
selects C on validation accuracy and refits on train + val (``merge_val=True``).

kNN: L2 (or cosine) distances, the k nearest vote; a tie between classes goes to the class with
the smallest distance sum among its voters. k-shot: exactly k per class from the train split only,
deterministic per seed. IQM: the mean of the middle 50 % (``scipy.stats.trim_mean(x, 0.25)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from neurips26.harness.validation import check_array, check_choice, check_scalar

C_GRID = tuple(float(c) for c in np.logspace(-6, 4, 40))
C_SUBGRID = C_GRID[::4][:9] + (C_GRID[-1],)  # 10 values, 1e-6 ... 1e4 (quick)
KNN_BLOCK = 64  # train rows per block of the kNN candidate threshold
KNN_CHUNK_ELEMENTS = 1 << 22  # query x train float32 distances held at once (16 MiB)


def _xy(x, y, name="x"):
    x = check_array(x, name, ndim=2, dtype=float, min_size=1)
    y = check_array(y, "y", ndim=1, dtype=int)
    if len(x) != len(y):
        raise ValueError(f"{name} and y must have the same number of rows: {len(x)} vs {len(y)}")
    return x, y


@dataclass
class LogisticProbe:
    """Multinomial logistic regression by torch L-BFGS (one C). ``coef_`` (K, D), ``intercept_`` (K,)."""

    C: float = 1.0
    max_iter: int = 100
    tol: float = 1e-4  # max |gradient| to stop, sklearn's default tol (tests use 1e-10 with float64)
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        self.C = check_scalar(self.C, "C", float, min=0, inclusive="neither")
        self.max_iter = check_scalar(self.max_iter, "max_iter", int, min=1)
        self.coef_ = None
        self.intercept_ = None

    def fit(self, x, y, n_classes: int | None = None, warm: "LogisticProbe | None" = None) -> "LogisticProbe":
        x, y = _xy(x, y)
        k = int(n_classes if n_classes is not None else y.max() + 1)
        xt = torch.as_tensor(x, dtype=self.dtype)
        yt = torch.as_tensor(y)
        n, d = xt.shape
        if warm is not None and warm.coef_ is not None and warm.coef_.shape == (k, d):
            w0, b0 = (
                torch.as_tensor(warm.coef_, dtype=self.dtype),
                torch.as_tensor(warm.intercept_, dtype=self.dtype),
            )
        else:
            w0, b0 = torch.zeros(k, d, dtype=self.dtype), torch.zeros(k, dtype=self.dtype)
        w = w0.clone().requires_grad_(True)
        b = b0.clone().requires_grad_(True)
        opt = torch.optim.LBFGS(
            [w, b],
            lr=1,
            max_iter=self.max_iter,
            tolerance_grad=self.tol,
            tolerance_change=self.tol * 1e-3,
            history_size=20,
            line_search_fn="strong_wolfe",
        )
        reg = 1.0 / (2.0 * self.C * n)

        def closure():
            opt.zero_grad()
            loss = F.cross_entropy(xt @ w.T + b, yt) + reg * (w * w).sum()
            loss.backward()
            return loss

        with torch.enable_grad():
            opt.step(closure)
        self.coef_ = w.detach().numpy().astype(np.float64)
        self.intercept_ = b.detach().numpy().astype(np.float64)
        self.n_classes_ = k
        return self

    def decision_function(self, x) -> np.ndarray:
        x = check_array(x, "x", ndim=2, dtype=float)
        return x @ self.coef_.T + self.intercept_

    def predict(self, x) -> np.ndarray:
        return np.argmax(self.decision_function(x), axis=1)

    def score(self, x, y) -> float:
        return float(np.mean(self.predict(x) == np.asarray(y)))


def standardise(train: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """Z-score every array with the train mean/std (a constant feature gets std 1)."""
    mu = train.mean(0)
    sd = train.std(0)
    sd[sd < 1e-12] = 1.0
    return [(a - mu) / sd for a in (train, *others)]


def sweep(
    x_tr,
    y_tr,
    x_val,
    y_val,
    c_grid=C_GRID,
    merge_val: bool = True,
    max_iter: int = 100,
    n_classes: int | None = None,
    dtype: torch.dtype = torch.float32,
    tol: float = 1e-4,
) -> tuple[LogisticProbe, dict]:
    """The C sweep (ascending, warm-started), selection on val, refit on train+val. Returns (probe, info)."""
    x_tr, y_tr = _xy(x_tr, y_tr, "x_train")
    x_val, y_val = _xy(x_val, y_val, "x_val")
    grid = sorted(float(c) for c in c_grid)
    if not grid:
        raise ValueError("c_grid must hold at least one value")
    k = int(n_classes if n_classes is not None else max(y_tr.max(), y_val.max()) + 1)
    prev, accs = None, []
    for c in grid:
        prev = LogisticProbe(c, max_iter, tol, dtype=dtype).fit(x_tr, y_tr, k, warm=prev)
        accs.append(prev.score(x_val, y_val))
    best = len(accs) - 1 - int(np.argmax(accs[::-1]))  # ties -> the largest C (a tiny C leaves only the
    # intercepts, which follow the class priors of the fitting set and collapse under a train/val shift)
    probe = LogisticProbe(grid[best], max_iter, tol, dtype=dtype)
    if merge_val:
        warm = LogisticProbe(grid[best], max_iter, tol, dtype=dtype).fit(x_tr, y_tr, k)
        probe.fit(np.vstack([x_tr, x_val]), np.r_[y_tr, y_val], k, warm=warm)
    else:
        probe.fit(x_tr, y_tr, k)
    return probe, {"best_C": grid[best], "val_acc": accs, "c_grid": grid}


def sgd_probe(
    x_tr, y_tr, n_classes: int, lr: float = 0.01, batch: int = 64, epochs: int = 50, seed: int = 0
) -> LogisticProbe:
    """A hidden-knob probe: plain minibatch SGD on the unregularised cross-entropy (ours)."""
    x_tr, y_tr = _xy(x_tr, y_tr)
    g = torch.Generator().manual_seed(seed)
    xt = torch.as_tensor(x_tr, dtype=torch.float32)
    yt = torch.as_tensor(y_tr)
    w = torch.zeros(n_classes, xt.shape[1], requires_grad=True)
    b = torch.zeros(n_classes, requires_grad=True)
    opt = torch.optim.SGD([w, b], lr=lr)
    with torch.enable_grad():
        for _ in range(epochs):
            perm = torch.randperm(len(xt), generator=g)
            for i in range(0, len(xt), batch):
                idx = perm[i : i + batch]
                opt.zero_grad()
                F.cross_entropy(xt[idx] @ w.T + b, yt[idx]).backward()
                opt.step()
    p = LogisticProbe(1.0)
    p.coef_, p.intercept_, p.n_classes_ = w.detach().double().numpy(), b.detach().double().numpy(), n_classes
    return p


def knn_neighbors(x_tr, x_te, k: int = 5, metric: str = "l2", batch: int = 1024):
    """The ``k`` nearest train rows of each test row: ``(dist, idx)``, each (n_test, k), nearest first.

    Exact (float64) neighbours at float32 matmul speed, with no sort or ``topk`` over all distances:

    1. ``s = ||a||^2 - 2 q.a`` by one float32 ``addmm`` per chunk of queries (``||q||^2`` is a row
       constant); ``|s - s_exact| <= e``, the float32 rounding bound below;
    2. the train rows are cut into blocks of ``KNN_BLOCK``; ``t`` = the k-th smallest block minimum,
       so at least k rows have ``s <= t`` and the true k-th nearest has ``s_exact <= t + e``;
    3. every row with ``s <= t + 2e`` is a candidate (this holds all rows at least as near as the
       k-th, whatever the rounding), searched only in blocks whose minimum is ``<= t + 2e``; their
       distances are recomputed exactly in float64 and the k smallest kept, ties by train index.
    Cosine: L2 on unit vectors, reported as ``1 - cos``.
    """
    x_tr = check_array(x_tr, "x_train", ndim=2, dtype=float, min_size=1)
    x_te = check_array(x_te, "x_test", ndim=2, dtype=float)
    if x_te.shape[1] != x_tr.shape[1]:
        raise ValueError(f"x_test must have {x_tr.shape[1]} columns like x_train, got {x_te.shape[1]}")
    k = check_scalar(k, "k", int, min=1, max=len(x_tr))
    check_choice(metric, "metric", ("l2", "cosine"))
    batch = check_scalar(batch, "batch", int, min=1)
    if len(x_te) == 0:
        return np.zeros((0, k)), np.zeros((0, k), dtype=np.int64)
    a = torch.as_tensor(x_tr, dtype=torch.float64)
    if metric == "cosine":
        a = F.normalize(a, dim=1)
    m, dim = a.shape
    a32, a2 = a.float(), (a * a).sum(1)
    a2_32 = a2.float()[None]
    amax = float(a2.max().sqrt())
    w = max(1, min(KNN_BLOCK, m // k))  # block width; >= k blocks
    nb = -(-m // w)
    eps = float(torch.finfo(torch.float32).eps)
    chunk = max(1, min(batch, KNN_CHUNK_ELEMENTS // m))
    dists, idxs = [], []
    for i in range(0, len(x_te), chunk):
        q = torch.as_tensor(x_te[i : i + chunk], dtype=torch.float64)
        if metric == "cosine":
            q = F.normalize(q, dim=1)
        n = len(q)
        q2 = (q * q).sum(1)
        s = torch.addmm(a2_32, q.float(), a32.T, alpha=-2.0)
        blocks = (F.pad(s, (0, nb * w - m), value=float("inf")) if nb * w != m else s).view(n, nb, w)
        bmin = blocks.amin(2)
        t = torch.topk(bmin, k, dim=1, largest=False).values[:, -1]
        # float32 rounding of ||a||^2 - 2 q.a (dot products of length dim), doubled for margin
        cut = t + 4 * (dim + 4) * eps * (amax * amax + 2 * q2.sqrt() * amax)
        rb, bb = torch.nonzero(bmin <= cut[:, None], as_tuple=True)  # only blocks that can hold one
        hit, col = torch.nonzero(blocks[rb, bb] <= cut[rb, None], as_tuple=True)
        r, c = rb[hit], bb[hit] * w + col
        d2 = ((q[r] - a[c]) ** 2).sum(1)
        order = np.lexsort((c.numpy(), d2.numpy(), r.numpy()))  # by row, then distance, then index
        starts = np.r_[0, np.cumsum(np.bincount(r.numpy(), minlength=n))[:-1]]
        pick = order[starts[:, None] + np.arange(k)]
        d2, c = d2.numpy()[pick], c.numpy()[pick]
        dists.append(np.sqrt(d2) if metric == "l2" else d2 / 2)
        idxs.append(c)
    return np.concatenate(dists), np.concatenate(idxs)


def knn_predict(x_tr, y_tr, x_te, k: int = 5, metric: str = "l2", batch: int = 1024) -> np.ndarray:
    """kNN majority vote; ties between classes -> the class with the smallest distance sum."""
    x_tr, y_tr = _xy(x_tr, y_tr, "x_train")
    dist, idx = knn_neighbors(x_tr, x_te, k, metric, batch)
    if len(idx) == 0:
        return np.zeros(0, dtype=int)
    n_classes = int(y_tr.max()) + 1
    lab = torch.as_tensor(y_tr)[torch.as_tensor(idx)]
    dist = torch.as_tensor(dist)
    votes = F.one_hot(lab, n_classes).sum(1).double()
    dsum = torch.zeros(len(lab), n_classes, dtype=torch.float64).scatter_add_(1, lab, dist)
    score = votes * 1e6 - dsum / (dsum.max() + 1.0)  # votes first, then the smaller distance sum
    return score.argmax(1).numpy()


def k_shot(y: np.ndarray, train_idx: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Exactly ``k`` train indices per class, sampled deterministically from the train split only."""
    y = np.asarray(y)
    train_idx = np.asarray(train_idx)
    k = check_scalar(k, "k", int, min=1)
    classes, counts = np.unique(y[train_idx], return_counts=True)
    if k > counts.min():
        raise ValueError(
            f"k must be <= the smallest class count in train ({counts.min()}, class "
            f"{classes[counts.argmin()]}), got {k}"
        )
    rng = np.random.default_rng([seed, k])
    picks = [rng.choice(np.sort(train_idx[y[train_idx] == c]), size=k, replace=False) for c in classes]
    return np.sort(np.concatenate(picks))


def label_fraction(y: np.ndarray, train_idx: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A stratified ``fraction`` of the train split (>= 1 per class), deterministic per seed."""
    fraction = check_scalar(fraction, "fraction", float, min=0, max=1, inclusive="right")
    y = np.asarray(y)
    train_idx = np.asarray(train_idx)
    rng = np.random.default_rng([seed, int(round(fraction * 1e6))])
    picks = []
    for c in np.unique(y[train_idx]):
        members = np.sort(train_idx[y[train_idx] == c])
        m = max(1, int(round(fraction * len(members))))
        picks.append(rng.choice(members, size=m, replace=False))
    return np.sort(np.concatenate(picks))


def bootstrap_accuracy_ci(correct: np.ndarray, n_boot: int = 200, seed: int = 0) -> tuple[float, float]:
    """95 % percentile CI of the accuracy over test samples (its own seed 0, not the run's)."""
    correct = np.asarray(correct, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(correct), (n_boot, len(correct)))
    boots = correct[idx].mean(1)
    return float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def iqm(x) -> float:
    """Interquartile mean (rliable's aggregate)."""
    from scipy.stats import trim_mean

    x = check_array(x, "x", ndim=1, dtype=float, min_size=1)
    return float(trim_mean(x, 0.25))


def iqm_ci(scores: np.ndarray, n_boot: int = 200, seed: int = 0) -> tuple[float, float, float]:
    """IQM of (runs x tasks) min-max-normalised scores + stratified bootstrap CI (runs resampled per task)."""
    s = check_array(scores, "scores", ndim=2, dtype=float, min_size=1)
    rng = np.random.default_rng(seed)
    point = iqm(s.ravel())
    boots = []
    for _ in range(n_boot):
        cols = [s[rng.integers(0, s.shape[0], s.shape[0]), j] for j in range(s.shape[1])]
        boots.append(iqm(np.concatenate(cols)))
    return point, float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))
