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


# ---- the v-LFW protocols on embeddings (spec §7) -----------------------------------------------

def verification_pairs(labels, folds: int = 10, per_fold: int = 30, seed: int = 0) -> tuple[np.ndarray, ...]:
    """View-2 layout at 1/10 scale: ``folds`` contiguous folds of ``per_fold`` mated + ``per_fold``
    non-mated image pairs (i, j, mated), drawn without repeating a pair."""
    y = check_array(labels, "labels", ndim=1, dtype=int, min_size=2)
    folds = check_scalar(folds, "folds", int, min=2)
    per_fold = check_scalar(per_fold, "per_fold", int, min=1)
    rng = np.random.default_rng(check_scalar(seed, "seed", int, min=0))
    i, j = np.triu_indices(y.size, 1)
    mated = y[i] == y[j]
    need = folds * per_fold
    if mated.sum() < need or (~mated).sum() < need:
        raise ValueError(f"labels give {int(mated.sum())} mated / {int((~mated).sum())} non-mated pairs; "
                         f"{need} of each are needed")
    pos = rng.choice(np.flatnonzero(mated), need, replace=False).reshape(folds, per_fold)
    neg = rng.choice(np.flatnonzero(~mated), need, replace=False).reshape(folds, per_fold)
    idx = np.concatenate([pos, neg], 1).ravel()
    return i[idx], j[idx], mated[idx]


def all_pair_scores(emb, labels) -> tuple[np.ndarray, np.ndarray]:
    """Cosines and mated flags of every unordered pair of unit rows."""
    e = check_array(emb, "emb", ndim=2, dtype=float)
    y = check_array(labels, "labels", ndim=1, dtype=int, shape=(e.shape[0],))
    i, j = np.triu_indices(y.size, 1)
    return (e @ e.T)[i, j], y[i] == y[j]


def protocol1(emb, labels, fars: tuple = (1e-3, 1e-4), per_fold: int = 30, seed: int = 0) -> dict:
    """Virtual verification: 10-fold accuracy on the View-2-style pairs (``per_fold`` mated + non-mated
    per fold; 30 = LFW at 1/10 scale); TAR@FAR and AUC on all pairs."""
    e = check_array(emb, "emb", ndim=2, dtype=float)
    pi, pj, mated = verification_pairs(labels, per_fold=per_fold, seed=seed)
    s = (e[pi] * e[pj]).sum(1)
    sa, ma = all_pair_scores(e, labels)
    auc, eer = auc_eer(sa, ma)
    return {"accuracy": ten_fold_accuracy(s, mated), "n_pairs": int(s.size), "per_fold": per_fold,
            "tar": {str(f): tar_at_far(sa, ma, f) for f in fars}, "auc": auc, "eer": eer,
            "n_all_pairs": int(sa.size)}


def protocol2(real_emb, virtual_emb, tau: float, real_impostor_fmr: float) -> dict:
    """Cross-reality matching: every (real image, virtual image) pair is non-mated; the false-match rate
    at ``tau`` against the real-impostor rate at the same threshold (should be no worse)."""
    r = check_array(real_emb, "real_emb", ndim=2, dtype=float)
    v = check_array(virtual_emb, "virtual_emb", ndim=2, dtype=float, shape=(None, r.shape[1]))
    s = r @ v.T
    return {"fmr_cross": float((s >= tau).mean()), "fmr_real": float(real_impostor_fmr),
            "mean_cross": float(s.mean()), "p99_cross": float(np.quantile(s, 0.99)), "n_pairs": int(s.size)}


def protocol3_registry(real_emb, virtual_emb, virtual_centers, tau: float) -> dict:
    """Real-vs-virtual detection by registry lookup: score = cos to the nearest virtual center;
    AUC/EER (virtual = positive) and the flag rates at ``tau``."""
    r = check_array(real_emb, "real_emb", ndim=2, dtype=float)
    v = check_array(virtual_emb, "virtual_emb", ndim=2, dtype=float, shape=(None, r.shape[1]))
    c = check_array(virtual_centers, "virtual_centers", ndim=2, dtype=float, shape=(None, r.shape[1]))
    sr, sv = (r @ c.T).max(1), (v @ c.T).max(1)
    auc, eer = auc_eer(np.concatenate([sr, sv]), np.r_[np.zeros(sr.size, bool), np.ones(sv.size, bool)])
    return {"auc": auc, "eer": eer, "flag_virtual": float((sv >= tau).mean()),
            "flag_real": float((sr >= tau).mean())}


def protocol3_detector(real_images, virtual_images, epochs: int = 3, lr: float = 2e-3, batch: int = 32,
                       seed: int = 0, also: dict | None = None) -> tuple[dict, np.ndarray, np.ndarray]:
    """Real-vs-virtual detection by an image-level binary CNN (the ``FREncoder`` body with one logit),
    trained on a random half of each set and scored on the other half. Returns (AUC/EER metrics,
    test scores, test labels with virtual = True). AUC near 0.5 = virtual images look real to it.
    ``also``: {name: images} scored by the trained CNN; metrics["also"][name] = the share it calls
    positive (the second set's class) at the test split's equal-error operating point."""
    import torch
    import torch.nn.functional as F

    from neurips26.bip.encoder import FREncoder, check_images

    xr, xv = check_images(real_images, "real_images"), check_images(virtual_images, "virtual_images")
    if xr.shape[1:] != xv.shape[1:]:
        raise ValueError(f"real_images {tuple(xr.shape[1:])} and virtual_images {tuple(xv.shape[1:])} differ")
    g = torch.Generator().manual_seed(check_scalar(seed, "seed", int, min=0))
    x = torch.cat([xr, xv])
    y = torch.cat([torch.zeros(xr.shape[0]), torch.ones(xv.shape[0])])
    perm = torch.randperm(x.shape[0], generator=g)
    tr, te = perm[: x.shape[0] // 2], perm[x.shape[0] // 2:]
    torch.manual_seed(seed)
    net = FREncoder(dim=1)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    net.train()
    for _ in range(check_scalar(epochs, "epochs", int, min=1)):
        p = tr[torch.randperm(tr.numel(), generator=g)]
        for i in range(0, p.numel(), batch):
            b = p[i:i + batch]
            loss = F.binary_cross_entropy_with_logits(net.features(x[b])[:, 0], y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        s = net.features(x[te])[:, 0].numpy().astype(float)
        extra = {k: net.features(check_images(v, k))[:, 0].numpy() for k, v in (also or {}).items()}
    pos = y[te].numpy().astype(bool)
    auc, eer = auc_eer(s, pos)
    from sklearn.metrics import roc_curve

    fpr, tpr, thr = roc_curve(pos, s)
    t = thr[int(np.argmin(np.abs(fpr - (1 - tpr))))]
    extra = {k: float((v >= t).mean()) for k, v in extra.items()}
    return {"auc": auc, "eer": eer, "n_test": int(te.numel()), "also": extra}, s, pos


def protocol4(real_centers, virtual_centers, probes, probe_ids, probe_virtual, fpir: tuple = (1e-2,)) -> dict:
    """Unified recognition + detection: open-set identification against the gallery R u V.

    The gallery is ``[real_centers; virtual_centers]`` (entries 0..N-1 real, N..N+M-1 virtual).
    ``probe_ids`` gives each probe's gallery entry, or -1 for a non-mated probe (an identity enrolled
    nowhere); ``probe_virtual`` whether the probe is a virtual image. For each probe the system outputs
    (identity, is_virtual): the top-1 entry if its score reaches the threshold, else "unknown", and
    is_virtual = the top-1 entry is virtual. Reports

    - rank-1: share of mated probes whose top-1 entry is theirs (closed set);
    - DIR@FPIR: the threshold t is the (1 - FPIR) quantile of the non-mated probes' top-1 scores
      (``FPIR = #{non-mated: max_g s >= t} / #non-mated``), ``DIR = #{mated: top-1 correct and s >= t} / #mated``;
    - joint accuracy at each FPIR point: share of all probes with both outputs right (mated: the right
      identity accepted; non-mated: rejected; and is_virtual equal to the probe's truth);
    - detection accuracy: share of probes whose is_virtual output is right.
    """
    r = check_array(real_centers, "real_centers", ndim=2, dtype=float, min_size=1)
    v = check_array(virtual_centers, "virtual_centers", ndim=2, dtype=float, shape=(None, r.shape[1]),
                    min_size=1)
    p = check_array(probes, "probes", ndim=2, dtype=float, shape=(None, r.shape[1]), min_size=1)
    ids = check_array(probe_ids, "probe_ids", ndim=1, dtype=int, shape=(p.shape[0],))
    isv = check_array(probe_virtual, "probe_virtual", ndim=1, dtype=bool, shape=(p.shape[0],))
    n_g = r.shape[0] + v.shape[0]
    if ids.min() < -1 or ids.max() >= n_g:
        raise ValueError(f"probe_ids must be gallery entries in [0, {n_g}) or -1 (non-mated)")
    mated = ids >= 0
    if mated.sum() == 0 or (~mated).sum() == 0:
        raise ValueError("probe_ids needs both mated probes (>= 0) and non-mated probes (-1) for FPIR")
    gallery_virtual = np.r_[np.zeros(r.shape[0], bool), np.ones(v.shape[0], bool)]
    if (gallery_virtual[ids[mated]] != isv[mated]).any():
        raise ValueError("probe_virtual disagrees with the gallery entry of a mated probe")
    s = p @ np.concatenate([r, v]).T
    top = s.argmax(1)
    top_s = s[np.arange(s.shape[0]), top]
    hit = top == ids                                       # never true for non-mated (-1)
    pred_virtual = gallery_virtual[top]
    det_ok = pred_virtual == isv
    out = {"n_probes": int(p.shape[0]), "n_mated": int(mated.sum()), "n_nonmated": int((~mated).sum()),
           "n_gallery": int(n_g), "rank1": float(hit[mated].mean()), "detection_accuracy": float(det_ok.mean()),
           "dir": {}, "joint_accuracy": {}, "threshold": {}}
    nm = np.sort(top_s[~mated])[::-1]
    for f in fpir:
        f = check_scalar(f, "fpir", float, min=0, max=1, inclusive="neither")
        k = int(np.floor(f * nm.size))                     # at most k non-mated probes may pass
        t = np.nextafter(nm[k], np.inf) if k < nm.size else -np.inf
        accept = top_s >= t
        ident_ok = np.where(mated, hit & accept, ~accept)
        out["dir"][str(f)] = float((hit & accept)[mated].mean())
        out["joint_accuracy"][str(f)] = float((ident_ok & det_ok).mean())
        out["threshold"][str(f)] = float(t)
    return out
