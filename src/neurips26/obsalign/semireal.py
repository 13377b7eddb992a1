"""Semi-real benchmarks built offline: Healthcare-tabular (scikit-learn's breast cancer and wine) and
DigitsTri (scikit-learn digits images, ``mnist1d`` signals from its built-in templates, templated text).

DigitsTri pairs are drawn within class: a sample of class ``c`` gets a random digits image of ``c``, a
random mnist1d signal of ``c`` and a random text template of ``c`` ("seven", "7", "digit seven", ...)
encoded as a bag of tokens with two random distractor tokens (**ASSUMPTION**: the encoding).

Each dataset's features are split into groups that play the modalities (breast cancer: 10 "mean",
10 "error", 10 "worst" features; wine: 6 / 7 features); sources partition the modalities and the
patients (**ASSUMPTION**: the layout below). There is no blindness ground truth here: every relation is
``alignable``, so omega's AUROC is undefined on these data; they test the loop on real features.
"""

from __future__ import annotations

import numpy as np

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.obsalign.obsbench import ObsBench, Source, SourceSpec, Split

GROUPS = {"breast_cancer": (slice(0, 10), slice(10, 20), slice(20, 30)),
          "wine": (slice(0, 6), slice(6, 13))}
LAYOUTS = {"breast_cancer": [SourceSpec((0, 1)), SourceSpec((1, 2), label_fraction=0.1), SourceSpec((0, 2)),
                             SourceSpec((0,))],
           "wine": [SourceSpec((0, 1)), SourceSpec((0,)), SourceSpec((1,), label_fraction=0.2)]}


def _load(name: str) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_breast_cancer, load_wine

    X, y = (load_breast_cancer if name == "breast_cancer" else load_wine)(return_X_y=True)
    X = (X - X.mean(axis=0)) / np.maximum(X.std(axis=0), 1e-12)
    return X, y


def _split(X, y, groups, spec: SourceSpec, rng, missing: float) -> Split:
    n, K = len(y), len(groups)
    mask = np.zeros((n, K), bool)
    mask[:, list(spec.modalities)] = True
    if len(spec.modalities) > 1:
        drop = rng.random((n, len(spec.modalities))) < missing
        drop[drop.all(axis=1), 0] = False
        mask[:, list(spec.modalities)] &= ~drop
    x = [np.where(mask[:, m:m + 1], X[:, g], 0.0) for m, g in enumerate(groups)]
    lab = rng.random(n) < spec.label_fraction
    return Split(x, mask, y.copy(), np.where(lab, y, -1), np.zeros(n, bool))


def make_healthcare(seed: int = 0, dataset: str = "breast_cancer", missing: float = 0.1,
                    test_fraction: float = 0.2) -> ObsBench:
    """Healthcare-tabular as an ``ObsBench``: patients split into sources (60/20/20 train/val/test) and a
    held-out pool for the unimodal tests."""
    seed = check_scalar(seed, "seed", int, min=0)
    dataset = check_choice(dataset, "dataset", tuple(GROUPS))
    missing = check_scalar(missing, "missing", float, min=0, max=1, inclusive="left")
    test_fraction = check_scalar(test_fraction, "test_fraction", float, min=0, max=1, inclusive="neither")
    X, y = _load(dataset)
    groups = GROUPS[dataset]
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(y))
    n_test = int(test_fraction * len(y))
    test, rest = perm[:n_test], perm[n_test:]
    specs = LAYOUTS[dataset]
    sources = []
    for spec, part in zip(specs, np.array_split(rest, len(specs))):
        a, b = int(0.6 * len(part)), int(0.8 * len(part))
        sp = [_split(X[idx], y[idx], groups, spec, rng, missing) for idx in (part[:a], part[a:b], part[b:])]
        sources.append(Source(SourceSpec(spec.modalities, None, a, spec.label_fraction), *sp))
    C = int(y.max()) + 1
    uni = [(X[test][:, g], y[test]) for g in groups]
    K = len(groups)
    dims = tuple(g.stop - g.start for g in groups)
    return ObsBench(sources, C, dims, tuple(frozenset() for _ in groups), uni, np.ones((K, K, C), bool))


WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
TEMPLATES = ("{w}", "{n}", "digit {w}", "number {n}", "the digit {w}", "a {w}")
DIGITS_LAYOUT = [SourceSpec((0, 2), n=300), SourceSpec((0, 1), n=300, label_fraction=0.1),
                 SourceSpec((1, 2), n=300), SourceSpec((0,), n=150)]


def _vocab() -> dict[str, int]:
    words = list(WORDS) + [str(i) for i in range(10)] + ["digit", "number", "the", "a"]
    return {w: i for i, w in enumerate(words)}


def text_features(labels: np.ndarray, rng: np.random.Generator, distractors: int = 2) -> np.ndarray:
    """Bag-of-tokens vectors of random class templates plus random distractor tokens."""
    vocab = _vocab()
    out = np.zeros((len(labels), len(vocab)))
    for i, c in enumerate(labels):
        t = TEMPLATES[rng.integers(len(TEMPLATES))].format(w=WORDS[c], n=c)
        for tok in t.split():
            out[i, vocab[tok]] += 1
        out[i, rng.integers(len(vocab), size=distractors)] += 1
    return out


def make_digits_tri(seed: int = 0, missing: float = 0.1, unimodal_per_class: int = 30) -> ObsBench:
    """DigitsTri as an ``ObsBench``: image (64), sensor (40), text (bag of tokens); 10 classes."""
    from mnist1d.data import get_dataset_args, make_dataset
    from sklearn.datasets import load_digits

    seed = check_scalar(seed, "seed", int, min=0)
    missing = check_scalar(missing, "missing", float, min=0, max=1, inclusive="left")
    rng = np.random.default_rng(seed)
    Xi, yi = load_digits(return_X_y=True)
    Xi = Xi / 16.0
    args = get_dataset_args()
    args.num_samples, args.seed = 4000, seed
    d = make_dataset(args)
    Xs, ys = np.concatenate([d["x"], d["x_test"]]), np.concatenate([d["y"], d["y_test"]])
    Xs = (Xs - Xs.mean()) / Xs.std()
    pools = [{c: np.flatnonzero(yy == c) for c in range(10)} for yy in (yi, ys)]

    def draw(y):
        img = np.stack([Xi[rng.choice(pools[0][c])] for c in y])
        sig = np.stack([Xs[rng.choice(pools[1][c])] for c in y])
        return [img, sig, text_features(y, rng)]

    def split(spec: SourceSpec, n: int) -> Split:
        y = rng.integers(10, size=n)
        X = draw(y)
        mask = np.zeros((n, 3), bool)
        mask[:, list(spec.modalities)] = True
        if len(spec.modalities) > 1:
            drop = rng.random((n, len(spec.modalities))) < missing
            drop[drop.all(axis=1), 0] = False
            mask[:, list(spec.modalities)] &= ~drop
        lab = rng.random(n) < spec.label_fraction
        x = [np.where(mask[:, m:m + 1], X[m], 0.0) for m in range(3)]
        return Split(x, mask, y, np.where(lab, y, -1), np.zeros(n, bool))

    sources = [Source(s, split(s, s.n), split(s, s.n // 2), split(s, s.n // 2)) for s in DIGITS_LAYOUT]
    yu = np.repeat(np.arange(10), unimodal_per_class)
    uni = list(zip(draw(yu), [yu] * 3))
    dims = (64, 40, len(_vocab()))
    return ObsBench(sources, 10, dims, (frozenset(),) * 3, uni, np.ones((3, 3, 10), bool))
