"""Bench helpers (fast) and the CLI end to end (slow)."""

import json
import subprocess
import sys

import pytest

from neurips26.nas import random_mdp
from neurips26.nas.bench import SOLVE_MODES, stop_check_fns, time_solves


def test_bench_helpers_measure_and_agree():
    m = random_mdp(3, 2, seed=13)
    t, gap = time_solves(m, rounds=2)
    assert set(t) == set(SOLVE_MODES) and all(t[k].n == 2 and t[k].median > 0 for k in SOLVE_MODES)
    assert gap < 1e-5                                      # the three solve paths agree on U
    ours, anchor = stop_check_fns(m)
    assert ours() == anchor()                              # policy and value iteration: the same decision


@pytest.mark.slow
def test_cli_bench_end_to_end(tmp_path):
    out = tmp_path / "bench"
    r = subprocess.run([sys.executable, "-m", "neurips26", "bench", "nas", "--out", str(out)],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr
    rows = json.loads((out / "bench.json").read_text())["rows"]
    assert any(row["name"].startswith("oracle solve") and row["ratio"] for row in rows)


@pytest.mark.slow
def test_cli_run_quick_end_to_end(tmp_path):
    r = subprocess.run([sys.executable, "-m", "neurips26", "run", "nas", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "result.json").read_text())
    v = {c["id"]: c["verdict"] for c in res["claims"]}
    assert v["correctness"] == "holds" and v["E1-slope"] == "holds"
