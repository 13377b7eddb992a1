"""Match lengths and estimators: spec acceptance checks 1-5 and bad input of the low-level API."""

import math

import numpy as np
import pytest

from neurips26.entropy_filter import entropy_rate, lpf_lambdas, match_lengths, naive_lambdas, window_lambdas
from neurips26.entropy_filter.match_lengths import HAVE_DIVSUFSORT, HAVE_NUMBA

BACKENDS = ["python"] + (["numba", "sa"] if HAVE_NUMBA else [])
ESTS = ["paper", "increasing_window", "sliding_window", "gao"]


def _random_sequences(n_seq=330, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for t in range(n_seq):
        n = int(rng.integers(2, 61))
        a = int(rng.integers(1, 5))
        if t % 3 == 0:  # a third periodic
            period = int(rng.integers(1, 5))
            x = np.tile(rng.integers(0, a, period), n // period + 1)[:n]
        else:
            x = rng.integers(0, a, n)
        out.append(x)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_sam_equals_naive_on_random_sequences(backend):
    seqs = _random_sequences()
    assert len(seqs) >= 300
    for x in seqs:
        np.testing.assert_array_equal(match_lengths(x, backend=backend), naive_lambdas(x))
        np.testing.assert_array_equal(match_lengths(x, overlap=True, backend=backend), naive_lambdas(x, overlap=True))


def test_overlap_equals_pydivsufsort_lpf():
    pytest.importorskip("pydivsufsort")
    for x in _random_sequences(seed=1):
        lpf = lpf_lambdas(x)
        np.testing.assert_array_equal(match_lengths(x, overlap=True), lpf)
        for dtype in (np.uint32, np.int64):
            np.testing.assert_array_equal(lpf_lambdas(x.astype(dtype)), lpf)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hand_cases(backend):
    a, b, c = 7, 3, 11  # arbitrary ids
    x = [a, b, a, b, a, b, c, a, b]
    np.testing.assert_array_equal(match_lengths(x, backend=backend), [1, 3, 3, 3, 2, 1, 3, 2])
    np.testing.assert_array_equal(match_lengths(x, overlap=True, backend=backend) - 1, [0, 4, 3, 2, 1, 0, 2, 1])
    const = [5] * 10
    np.testing.assert_array_equal(match_lengths(const, backend=backend),
                                  [min(i, 10 - i) + 1 for i in range(1, 10)])


def test_backends_agree_on_long_text():
    rng = np.random.default_rng(3)
    x = rng.zipf(1.5, 5000) % 300
    ref = match_lengths(x, backend="python")
    for be in BACKENDS:
        np.testing.assert_array_equal(match_lengths(x, backend=be), ref)
        np.testing.assert_array_equal(match_lengths(x, overlap=True, backend=be), lpf_lambdas(x))


def test_window_lambdas_direct_definition():
    rng = np.random.default_rng(4)
    for _ in range(40):
        n = int(rng.integers(5, 40))
        x = rng.integers(0, 3, n)
        W = int(rng.integers(2, n))
        ref = []
        for i in range(W, n):
            best = 0
            for j in range(i - W, i):
                L = 0
                while L < min(i - j, n - i) and x[j + L] == x[i + L]:
                    L += 1
                best = max(best, L)
            ref.append(best + 1)
        for be in BACKENDS:
            np.testing.assert_array_equal(window_lambdas(x, W, backend=be), ref)


def test_paper_estimator_formula():
    x = [0, 1, 0, 1, 0, 1, 2, 0, 1]
    lam = [1, 3, 3, 3, 2, 1, 3, 2]
    assert entropy_rate(x) == pytest.approx(9 * math.log2(9) / sum(lam))
    lp = np.log2(np.arange(2, 10))
    assert entropy_rate(x, "gao") == pytest.approx(np.mean(lp / np.array(lam)))
    assert entropy_rate(x, "increasing_window") == pytest.approx(1 / np.mean(np.array(lam) / lp))


@pytest.mark.parametrize("est", ESTS)
def test_constant_and_periodic_sources_are_near_zero(est):
    n = 4000
    assert entropy_rate(np.zeros(n, int), est) < 0.15
    assert entropy_rate(np.tile([0, 1, 2], n // 3 + 1)[:n], est) < 0.15


def test_fair_coin_and_bernoulli():
    rng = np.random.default_rng(5)
    coin = rng.integers(0, 2, 4000)
    assert abs(entropy_rate(coin) - 1.0) < 0.25
    big = rng.integers(0, 2, 20000)
    assert abs(entropy_rate(big, "gao") - 1.0) < 0.15
    assert abs(entropy_rate(big, "increasing_window") - 1.0) < 0.15
    bern = (rng.random(4000) < 0.1).astype(int)
    per = np.tile([0, 1, 2], 1334)[:4000]
    for est in ESTS:
        assert entropy_rate(per, est) < entropy_rate(bern, est) < entropy_rate(coin, est)


@pytest.mark.parametrize("est", ESTS)
def test_monotone_in_true_entropy(est):
    rng = np.random.default_rng(6)
    n = 5000
    sources = [(rng.random(n) < 0.110028).astype(int),   # H = 0.5 bit
               rng.integers(0, 2, n), rng.integers(0, 4, n), rng.integers(0, 8, n)]
    est_values = [entropy_rate(x, est) for x in sources]
    assert all(a < b for a, b in zip(est_values, est_values[1:])), est_values


def test_repetition_lowers_estimate():
    rng = np.random.default_rng(7)
    doc = rng.zipf(1.5, 1500) % 2000
    h1 = entropy_rate(doc)
    h2 = entropy_rate(np.concatenate([doc, doc]))
    assert h2 <= 0.7 * h1


@pytest.mark.parametrize("bad, exc, word", [
    ([0, -1, 2], ValueError, "non-negative"),
    ("abc", TypeError, "x"),
    ([[0, 1], [1, 0]], ValueError, "1-D"),
    ([0.5, 1.0], TypeError, "integer"),
])
def test_bad_token_arrays(bad, exc, word):
    with pytest.raises(exc, match=word):
        match_lengths(bad)


def test_bad_estimator_options():
    x = np.arange(20) % 3
    with pytest.raises(ValueError, match="estimator"):
        entropy_rate(x, "nope")
    with pytest.raises(ValueError, match="window"):
        entropy_rate(x, "sliding_window", window=1)
    with pytest.raises(ValueError, match="window"):
        entropy_rate(x, "sliding_window", window=20)
    with pytest.raises(ValueError, match="x"):
        entropy_rate([1])
    with pytest.raises(ValueError, match="backend"):
        match_lengths(x, backend="gpu")


# ------------------------------------------------------------------------------------------------
# the suffix-array construction (issue 30 item 6: flat cost per token) equals the SAM and the definition
# ------------------------------------------------------------------------------------------------

needs_sa = pytest.mark.skipif(not HAVE_NUMBA, reason="backend='sa' needs numba")
needs_ds = pytest.mark.skipif(not (HAVE_NUMBA and HAVE_DIVSUFSORT), reason="needs numba + pydivsufsort")


@needs_sa
def test_sa_equals_sam_property():
    import importlib

    from hypothesis import given, settings, strategies as st

    ml = importlib.import_module("neurips26.entropy_filter.match_lengths")

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.integers(0, 4), min_size=0, max_size=70), st.sampled_from([1, 299, 70_001, 2**40]),
           st.booleans())
    def check(ids, scale, overlap):
        x = np.asarray(ids, dtype=np.int64) * scale   # one-byte, two-byte, three-byte and relabelled codes
        sa = match_lengths(x, overlap=overlap, backend="sa")   # SA-IS
        np.testing.assert_array_equal(sa, match_lengths(x, overlap=overlap, backend="python"))
        if HAVE_DIVSUFSORT and x.size >= 2:                       # the byte-code construction too
            np.testing.assert_array_equal(ml._sa_lambdas(x, overlap, "divsufsort"), sa)
        if len(ids) <= 30:
            np.testing.assert_array_equal(sa, naive_lambdas(x, overlap=overlap))
    check()


@needs_sa
def test_sa_equals_sam_on_real_text_and_wide_vocabularies():
    from neurips26.entropy_filter.corpus import pydoc_topics
    from neurips26.entropy_filter.tokenize import dense_ids, unicode_tokenize

    ids = dense_ids([w for _, t in pydoc_topics() for w in unicode_tokenize(t, None)])
    assert ids.size > 60_000 and ids.max() > 300          # two-byte codes
    for x in (ids, (ids * 7919) % 200_003, np.tile(ids[:500], 40)):   # three-byte code; long repeats
        ref = match_lengths(x, backend="numba")
        np.testing.assert_array_equal(match_lengths(x, backend="sa"), ref)
        np.testing.assert_array_equal(match_lengths(x, overlap=True, backend="sa"),
                                      match_lengths(x, overlap=True, backend="numba"))
    assert entropy_rate(ids, backend="sa") == entropy_rate(ids, backend="numba")


@needs_sa
@pytest.mark.parametrize("sigma", [65_300, 70_000])
def test_sa_equals_sam_past_the_two_byte_code(sigma):
    # σ > 65,281: the fixed 3-byte code; σ ≤ 2^16 after relabelling: uint16 PLCP, else int32 (both paths),
    # with copied segments so that long matches and deep LCP intervals occur past the prefetch distance
    rng = np.random.default_rng(sigma)
    base = rng.permutation(sigma).astype(np.int64) * 3 + 10**9
    parts = [base]
    for _ in range(30):
        a = int(rng.integers(0, sigma - 500))
        parts.append(base[a:a + int(rng.integers(40, 500))])
        parts.append(rng.integers(0, sigma, 200) * 3 + 10**9)
    x = np.concatenate(parts)
    for overlap in (False, True):
        np.testing.assert_array_equal(match_lengths(x, overlap=overlap, backend="sa"),
                                      match_lengths(x, overlap=overlap, backend="numba"))


@needs_sa
def test_sais_is_the_sorted_order_of_the_suffixes():
    # SA-IS (issue 30 item 6) against sorting the suffixes directly: random, periodic, runs, a strictly
    # decreasing text (no LMS position), one id, several recursion levels (tiled blocks), sparse ids
    import importlib

    ml = importlib.import_module("neurips26.entropy_filter.match_lengths")
    rng = np.random.default_rng(5)
    cases = [np.arange(40)[::-1], np.zeros(33, np.int64), np.arange(25), np.array([7]), np.array([], np.int64),
             np.tile(rng.integers(0, 3, 7), 30), np.repeat(rng.integers(0, 4, 20), rng.integers(1, 5, 20)),
             rng.integers(0, 2**31 - 1, 60)]
    cases += [rng.integers(0, int(k), int(n)) for n, k in zip(rng.integers(2, 300, 200), rng.integers(1, 9, 200))]
    for x in cases:
        ref = sorted(range(x.size), key=lambda i: tuple(x[i:]))
        np.testing.assert_array_equal(ml.suffix_array(x.astype(np.int32)), np.asarray(ref, np.int32), str(x))
    with pytest.raises(ValueError, match="method"):
        ml.suffix_array(np.arange(3, dtype=np.int32), "qsufsort")


@needs_ds
def test_sais_and_divsufsort_give_the_same_lambdas():
    # the two suffix-array constructions sort under different id orders (the byte code orders ids by
    # frequency) and must give identical Λ; real text with a two-byte code and a 3-byte-code vocabulary
    import importlib

    from neurips26.entropy_filter.corpus import pydoc_topics
    from neurips26.entropy_filter.tokenize import dense_ids, unicode_tokenize

    ml = importlib.import_module("neurips26.entropy_filter.match_lengths")
    ids = dense_ids([w for _, t in pydoc_topics() for w in unicode_tokenize(t, None)])
    for x in (ids, (ids * 7919) % 200_003, np.tile(ids[:700], 30)):
        for overlap in (False, True):
            np.testing.assert_array_equal(ml._sa_lambdas(x, overlap, "sais"), ml._sa_lambdas(x, overlap, "divsufsort"))


@needs_ds
def test_thread_limit_reaches_the_libgomp_libdivsufsort_is_bound_to():
    # another wheel's copy of the same libgomp (scikit-learn bundles the same file) loaded first: libdivsufsort
    # binds to it by soname, so the 1-thread limit must go to that copy, not to a second one opened by path
    import subprocess
    import sys

    pytest.importorskip("sklearn")
    code = (
        "import sklearn.utils._openmp_helpers\n"
        "maps = lambda: sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libgomp' in l})\n"
        "import pydivsufsort\n"
        "before = maps()\n"
        "import importlib\n"
        "ml = importlib.import_module('neurips26.entropy_filter.match_lengths')\n"
        "omp = ml._omp()\n"
        "with ml._one_omp_thread():\n"
        "    inside = omp.omp_get_max_threads()\n"
        "print(before == maps(), inside)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "1"]   # no second libgomp copy opened; the limit is in force


@needs_sa
def test_auto_backend_takes_the_suffix_array_from_sa_min_n():
    import importlib

    ml = importlib.import_module("neurips26.entropy_filter.match_lengths")

    assert ml._check_backend("auto", ml.SA_MIN_N - 1) == "numba"
    assert ml._check_backend("auto", ml.SA_MIN_N) == "sa"
    with pytest.raises(ValueError, match="backend"):
        match_lengths([1, 2, 3], backend="suffix")


@pytest.mark.skipif(not HAVE_NUMBA, reason="SA-IS needs numba")
def test_suffix_array_refuses_negative_ids_and_a_wrong_work_buffer():
    from neurips26.entropy_filter.match_lengths import suffix_array

    with pytest.raises(ValueError, match="non-negative"):
        suffix_array(np.array([3, -1, 2, -1, 3], np.int32))
    with pytest.raises(ValueError, match="work"):
        suffix_array(np.array([1, 2, 1, 2, 1], np.int32), work=np.empty(2, np.int32))
    assert suffix_array(np.array([1, 2, 1, 2, 1], np.int32), work=np.empty(5, np.int32)).tolist() == [4, 2, 0, 3, 1]
