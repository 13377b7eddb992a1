"""The guided part of one local step as one compiled kernel (numba; used only where numba is installed).

``guided_kernel`` computes, from a batch's own embeddings ``z^m`` and the broadcast guidance, everything the
guided loss adds to the CE-only step (spec 5a-b; the formulas are ``model._GuidedTerms``'s and
``model._forward``'s):

    p0 = softmax(s_c cos(h0, w_c)),  p = onehot(y) if labelled else p0,  c_i = argmax p      (pseudo-classes)
    z~ = sum_{m' not in O_i} lambda_{m'} sum_c p(c|x) mu(m', c),  lambda_{m'} = sum_c p(c|x) T_i[m', c],
         T_i[m', c] = max_{m in O_i} w_tr(m, m', c)                                           (imputation)
    L_trans = sum_i sum_{m in O_i} sum_{m' not in O_i} w_tr(m, m', c_i) (1 - z^m_i . mu(m', c_i)/||mu||) / n
    L_align = sum_{m < m'} sum_{i in I} align(m, m', c_i) 0.5 (CE_i(S) + CE_i(S^T)) / n,  S = z^m_I z^{m'}_I^T / tau

and returns the imputation ``z~`` (n, d), the value ``lam_tr L_trans + lam_al L_align`` and its gradient
with respect to every ``z^m`` (the loss is linear in the incoming gradient, so the backward is a scale):
dL_trans/dz^m_i = -t^m_i / n; dL_align/dX = [W (P - 1) + (W (Q - 1))^T] / n on the co-observed rows I
(X = S, P / Q the row / column softmax of X, W_i = 0.5 align(m, m', c_i)), dz^m_I = dX z^{m'}_I / tau,
dz^{m'}_I = dX^T z^m_I / tau. The torch path in ``model`` computes the same (tests hold both to the spec's
per-pair loops); this one replaces ~90 small tensor calls per step with one call.
"""

from __future__ import annotations

import math

import numpy as np

from neurips26.harness.jit import HAVE_NUMBA, njit

EPS = 1e-12   # F.normalize's eps


@njit(cache=True)
def guided_kernel(Z, mask, mods, y, cls, mu, mu_unit, align, transfer, use_align, use_tr, scale, alpha,
                  lam_al, lam_tr, inv_n):
    """``Z`` (k, n, d) own embeddings in ``mods`` order; ``mask`` (n, K) bool; ``y`` (n,) (-1 unlabelled);
    ``cls`` (C, d) classifier rows; ``mu`` / ``mu_unit`` (K, C, d); ``align`` / ``transfer`` (K, K, C)
    (read only when ``use_align`` / ``use_tr``). Returns ``(imp (n, d), value, dZ (k, n, d))``."""
    k, n, d = Z.shape
    K, C = mu.shape[0], mu.shape[1]
    imp = np.zeros((n, d), Z.dtype)
    dZ = np.zeros((k, n, d), Z.dtype)
    Wn = np.empty((C, d))
    for c in range(C):   # w_c / ||w_c||
        s = 0.0
        for e in range(d):
            s += float(cls[c, e]) ** 2
        nr = max(math.sqrt(s), EPS)
        for e in range(d):
            Wn[c, e] = cls[c, e] / nr
    p = np.zeros((n, C))
    chat = np.empty(n, np.int64)
    h = np.empty(d)
    lg = np.empty(C)
    for i in range(n):
        if y[i] >= 0:   # labelled: p = onehot(y), c_i = y
            p[i, y[i]] = 1.0
            chat[i] = y[i]
            continue
        for e in range(d):
            h[e] = 0.0
        for j in range(k):   # h0 = sum_{m in O_i} z^m
            if mask[i, mods[j]]:
                for e in range(d):
                    h[e] += Z[j, i, e]
        s = 0.0
        for e in range(d):
            s += h[e] * h[e]
        nr = max(math.sqrt(s), EPS)
        best, arg = -np.inf, 0
        for c in range(C):   # s_c cos(h0, w_c)
            s = 0.0
            for e in range(d):
                s += h[e] * Wn[c, e]
            lg[c] = scale * s / nr
            if lg[c] > best:
                best, arg = lg[c], c
        tot = 0.0
        for c in range(C):
            lg[c] = math.exp(lg[c] - best)
            tot += lg[c]
        for c in range(C):
            p[i, c] = lg[c] / tot
        chat[i] = arg
    val_tr = 0.0
    if use_tr:
        for i in range(n):
            c = chat[i]
            for mp in range(K):
                if mask[i, mp]:
                    continue   # only missing modalities m' are imputed / transferred to
                lam = 0.0
                for cc in range(C):   # lambda_{m'} = sum_c p(c) max_{m in O_i} w_tr(m, m', c)
                    T = 0.0
                    for j in range(k):
                        if mask[i, mods[j]] and transfer[mods[j], mp, cc] > T:
                            T = transfer[mods[j], mp, cc]
                    lam += p[i, cc] * T
                if lam != 0.0:
                    for cc in range(C):
                        if p[i, cc] != 0.0:
                            for e in range(d):
                                imp[i, e] += lam * p[i, cc] * mu[mp, cc, e]
                for j in range(k):   # t^m_i = sum_{m'} w_tr(m, m', c_i) mu(m', c_i)/||mu||
                    m = mods[j]
                    if not mask[i, m]:
                        continue
                    w = float(transfer[m, mp, c])
                    if w == 0.0:
                        continue
                    s = 0.0
                    for e in range(d):
                        s += Z[j, i, e] * mu_unit[mp, c, e]
                        dZ[j, i, e] -= lam_tr * inv_n * w * mu_unit[mp, c, e]
                    val_tr += w - w * s
    val_al = 0.0
    if use_align and k >= 2:
        idx = np.empty(n, np.int64)
        for a in range(k):
            for b in range(a + 1, k):
                ma, mb = mods[a], mods[b]
                m = 0
                for i in range(n):   # I: the rows observing both
                    if mask[i, ma] and mask[i, mb]:
                        idx[m] = i
                        m += 1
                if m < 2:
                    continue   # one co-observed row: CE = 0 and no gradient
                A = np.empty((m, d), Z.dtype)
                B = np.empty((m, d), Z.dtype)
                Wv = np.empty(m)
                for r in range(m):
                    A[r] = Z[a, idx[r]]
                    B[r] = Z[b, idx[r]]
                    Wv[r] = 0.5 * align[ma, mb, chat[idx[r]]]
                X = np.dot(A, B.T) * alpha   # S / tau (float64)
                f = lam_al * alpha * inv_n
                G = np.empty((m, m), Z.dtype)    # W_r (P - 1) + W_c (Q - 1), times f
                hi, lo = X.max(), X.min()
                if hi - lo < 600.0:   # one exp per entry: P and Q from E = exp(X - max X) (no underflow)
                    E = np.exp(X - hi)
                    rs = E.sum(axis=1)
                    cs = E.sum(axis=0)
                    for r in range(m):   # log P_ii + log Q_ii
                        val_al += Wv[r] * (2.0 * (X[r, r] - hi) - math.log(rs[r]) - math.log(cs[r]))
                        wr = f * Wv[r] / rs[r]
                        for c in range(m):
                            G[r, c] = E[r, c] * (wr + f * Wv[c] / cs[c])
                        G[r, r] -= 2.0 * f * Wv[r]
                else:   # |S| / tau too wide for one shift: each row and column shifted by its own max
                    for r in range(m):
                        for c in range(m):
                            G[r, c] = 0.0
                    for ax in range(2):
                        for r in range(m):
                            mx = -np.inf
                            for c in range(m):
                                mx = max(mx, X[r, c] if ax == 0 else X[c, r])
                            s = 0.0
                            for c in range(m):
                                s += math.exp((X[r, c] if ax == 0 else X[c, r]) - mx)
                            val_al += Wv[r] * (X[r, r] - mx - math.log(s))
                            for c in range(m):
                                e = math.exp((X[r, c] if ax == 0 else X[c, r]) - mx) * f * Wv[r] / s
                                if ax == 0:
                                    G[r, c] += e
                                else:
                                    G[c, r] += e
                            G[r, r] -= f * Wv[r]
                dA = np.dot(G, B)
                dB = np.dot(G.T, A)
                for r in range(m):
                    for e in range(d):
                        dZ[a, idx[r], e] += dA[r, e]
                        dZ[b, idx[r], e] += dB[r, e]
    return imp, (lam_tr * val_tr - lam_al * val_al) * inv_n, dZ


__all__ = ["HAVE_NUMBA", "guided_kernel"]
