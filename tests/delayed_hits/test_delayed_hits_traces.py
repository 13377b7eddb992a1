"""Readers, writers, the shipped 5K trace, the libCacheSim Z=1 anchor, and bad input."""

from pathlib import Path

import numpy as np
import pytest

from neurips26.delayed_hits import (FIFO, LAFTPL, LRU, UCBDH, Belady, Trace, as_trace, from_slots,
                                    load_atre_5k, read_atre, read_csv, read_oracle_general, simulate,
                                    write_atre, write_oracle_general)
from neurips26.delayed_hits.trace import bundled_trace_path
from neurips26.delayed_hits.workloads import irm_zipf

REPO = Path(__file__).resolve().parents[2]
SHARED_5K = REPO.parent / "shared" / "data" / "traces" / "delayed_hits_5k.csv"


def test_bundled_5k_trace_facts_and_licence():
    tr = load_atre_5k()
    assert (tr.n_slots, tr.n_requests, tr.n_items) == (5000, 5000, 1606)
    lic = bundled_trace_path().with_name("delayed_hits_5k.LICENSE.txt")
    assert "Clear BSD" in lic.read_text()


@pytest.mark.skipif(not SHARED_5K.is_file(), reason="../shared/data not present beside the repo")
def test_bundled_copy_equals_shared_file():
    assert bundled_trace_path().read_bytes() == SHARED_5K.read_bytes()


def test_oracle_general_roundtrip(tmp_path):
    tr = load_atre_5k()
    p = write_oracle_general(tr, tmp_path / "t.bin")
    assert p.stat().st_size == 24 * 5000
    back = read_oracle_general(p)
    assert np.array_equal(back.ids, tr.ids)
    rec = np.fromfile(p, dtype=[("time", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
    # next_access_vtime points at the next request of the same object, -1 when none
    k = int(np.nonzero(rec["next"] >= 0)[0][0])
    assert rec["id"][rec["next"][k]] == rec["id"][k]


def test_atre_roundtrip_with_idle_slots(tmp_path):
    tr = from_slots([[3], [], [5], [3], [], []])
    p = write_atre(tr, tmp_path / "x.csv")
    back = read_atre(p)
    assert back.n_slots == tr.n_slots - 1 or back.n_slots == tr.n_slots
    # idle slots are kept as empty lines: identical latencies
    r1 = simulate(tr, LRU(), K=1, Z=3)
    r2 = simulate(back, LRU(), K=1, Z=3)
    assert r1.total_latency == r2.total_latency


def test_csv_reader_columns_header_and_timestamp_mapping(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("time,size,obj\n0,1,x\n0,1,y\n2,1,x\n")
    tr = read_csv(p, delimiter=",", has_header=True, time_col=1, obj_id_col=3)
    assert tr.ids.tolist() == [0, 1, 0] and tr.one_per_slot
    tr2 = read_csv(p, has_header=True, time_col=1, obj_id_col=3, slot_mapping="timestamp")
    assert tr2.n_slots == 3 and tr2.slot_ptr.tolist() == [0, 2, 2, 3]


def _lcs():
    return pytest.importorskip("libcachesim")


@pytest.mark.parametrize("K", [10, 50])
def test_z1_miss_counts_equal_libcachesim(tmp_path, K):
    """Check 2: Z = 1 LRU/FIFO/Belady miss counts equal libCacheSim's exactly (W8 and Zipf)."""
    lcs = _lcs()
    for name, tr in (("5k", load_atre_5k()), ("zipf", irm_zipf(2000, 20000, 0.9, seed=7)[0])):
        path = write_oracle_general(tr, tmp_path / f"{name}.oracleGeneral")
        for ours, theirs in ((LRU, lcs.LRU), (FIFO, lcs.FIFO), (Belady, lcs.Belady)):
            r = simulate(tr, ours(), K=K, Z=1)
            reader = lcs.TraceReader(str(path), lcs.TraceType.ORACLE_GENERAL_TRACE)
            miss_ratio = theirs(cache_size=K).process_trace(reader)[0]
            assert r.misses == round(miss_ratio * tr.n_requests), (name, ours.__name__)


# ---- bad input: a clear error naming the argument, before any work -----------------------------

@pytest.mark.parametrize("kw,exc,word", [
    (dict(K=0, Z=3), ValueError, "K"),
    (dict(K=2, Z=0), ValueError, "Z"),
    (dict(K=2, Z=2.5), TypeError, "Z"),
    (dict(K="2", Z=2), TypeError, "K"),
])
def test_bad_cache_args(kw, exc, word):
    with pytest.raises(exc, match=word):
        simulate(np.arange(10), LRU(), **kw)


@pytest.mark.parametrize("ids,exc,word", [
    ([0, -1, 2], ValueError, "ids"),
    ([0.0, float("nan")], ValueError, "ids"),
    ([0.5, 1.0], ValueError, "ids"),
    ([], ValueError, "empty"),
    ([True, False], TypeError, "ids"),          # strings are object ids now (remapped)
])
def test_bad_ids(ids, exc, word):
    with pytest.raises(exc, match=word):
        simulate(ids, LRU(), K=1, Z=2)


def test_ids_beyond_n_and_zero_slots():
    with pytest.raises(ValueError, match="n_items"):
        Trace(np.array([0, 5]), None, n_items=3)
    with pytest.raises(ValueError, match="T"):
        Trace(np.zeros(0, dtype=np.int64), np.array([0]), n_items=3)
    with pytest.raises(TypeError, match="trace"):
        as_trace("file.csv")


def test_bad_policy_params():
    with pytest.raises(ValueError, match="c_eta"):
        LAFTPL(c_eta=-1)
    with pytest.raises(ValueError, match="C_B"):
        LAFTPL(C_B=-0.5)
    with pytest.raises(ValueError, match="B"):
        from neurips26.delayed_hits import RestartedLAFTPL
        RestartedLAFTPL(B=-1)
    with pytest.raises(ValueError, match="refresh"):
        UCBDH(refresh=0)
    with pytest.raises(ValueError, match="alpha"):
        irm_zipf(10, 100, alpha=-0.1)
    with pytest.raises(TypeError, match="policy"):
        simulate([0, 1, 2], "LRU", K=1, Z=1)


def test_malformed_lines_report_line_number(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("0;1\n1;2\nthis-line-is-bad\n")
    with pytest.raises(ValueError, match="line 3"):
        read_atre(p)
    p.write_text("0;1\nx;2\n")
    with pytest.raises(ValueError, match="line 2"):
        read_atre(p)


def test_unsorted_timestamps(tmp_path):
    p = tmp_path / "u.csv"
    p.write_text("0;1\n5;2\n3;1\n")
    with pytest.raises(ValueError, match="line 3.*non-decreasing"):
        read_atre(p)


def test_empty_trace_file(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text("")
    with pytest.raises(ValueError, match="empty"):
        read_atre(p)
    b = tmp_path / "e.bin"
    b.write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        read_oracle_general(b)


def test_oracle_wrong_size(tmp_path):
    b = tmp_path / "w.bin"
    b.write_bytes(b"\0" * 25)
    with pytest.raises(ValueError, match="multiple of the 24-byte"):
        read_oracle_general(b)
