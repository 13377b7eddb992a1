"""v-LFW protocol metrics: View-2 style 10-fold verification accuracy (threshold picked on 9 folds),
TAR at FAR, AUC/EER of a real-vs-virtual detector score, and the cross-reality false-match rate."""

from __future__ import annotations

import numpy as np

from neurips26.harness.validation import check_array, check_scalar


def ten_fold_accuracy(scores, mated, folds: int = 10) -> float:
    """Mean test accuracy over ``folds`` contiguous folds; each fold's threshold maximises the
    accuracy on the other folds."""
    s = check_array(scores, "scores", ndim=1, dtype=float, min_size=2)
    y = check_array(mated, "mated", ndim=1, dtype=bool, shape=(s.shape[0],))
    folds = check_scalar(folds, "folds", int, min=2, max=s.shape[0])
    parts = np.array_split(np.arange(s.shape[0]), folds)
    accs = []
    for f in parts:
        train = np.setdiff1d(np.arange(s.shape[0]), f)
        u = np.unique(s[train])                    # midpoints between consecutive training scores
        cand = np.concatenate([[u[0] - 1.0], (u[1:] + u[:-1]) / 2, [u[-1] + 1.0]])
        acc_train = [((s[train] >= t) == y[train]).mean() for t in cand]
        t = cand[int(np.argmax(acc_train))]
        accs.append(((s[f] >= t) == y[f]).mean())
    return float(np.mean(accs))


def tar_at_far(scores, mated, far: float) -> float:
    s = check_array(scores, "scores", ndim=1, dtype=float)
    y = check_array(mated, "mated", ndim=1, dtype=bool, shape=(s.shape[0],))
    far = check_scalar(far, "far", float, min=0, max=1, inclusive="neither")
    imp = np.sort(s[~y])[::-1]
    t = imp[min(int(np.floor(far * imp.size)), imp.size - 1)]
    return float((s[y] > t).mean())


def auc_eer(scores, positive) -> tuple[float, float]:
    """AUC and EER of a detector score (positive = virtual)."""
    from sklearn.metrics import roc_auc_score, roc_curve

    s = check_array(scores, "scores", ndim=1, dtype=float)
    y = check_array(positive, "positive", ndim=1, dtype=bool, shape=(s.shape[0],))
    fpr, tpr, _ = roc_curve(y, s)
    i = int(np.argmin(np.abs(fpr - (1 - tpr))))
    return float(roc_auc_score(y, s)), float((fpr[i] + 1 - tpr[i]) / 2)
