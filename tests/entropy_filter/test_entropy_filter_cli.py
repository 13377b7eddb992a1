"""`neurips26 entropy-filter score|filter` over JSONL: outputs, per-domain top-k, bad input, atomicity."""

import json
import subprocess
import sys

import pytest

from neurips26.cli import main as top_main
from neurips26.entropy_filter import hk
from neurips26.entropy_filter.cli import main

pytest.importorskip("nltk")

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho".split()


def _doc(i, n=120):
    import numpy as np

    rng = np.random.default_rng(i)
    return " ".join(WORDS[k] + str(rng.integers(0, 3 + i)) for k in rng.integers(0, len(WORDS), n))


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "in.jsonl"
    rows = [{"id": i, "text": _doc(i), "dom": ["a", "b", "c"][i % 3]} for i in range(20)]
    rows.append({"id": 20, "text": "too short", "dom": "a"})
    rows.append({"id": 21, "text": "the cat sat " * 100, "dom": "b"})
    with path.open("w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        f.write("\n")  # blank lines are skipped
    return path, rows


def _read(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_score(corpus, tmp_path):
    path, rows = corpus
    out = tmp_path / "out.jsonl"
    assert main(["score", str(path), "-o", str(out), "--quiet"]) == 0
    got = _read(out)
    assert [r["id"] for r in got] == [r["id"] for r in rows]
    for r, g in zip(rows, got):
        assert g["hk"] == (None if hk(r["text"]) is None else pytest.approx(hk(r["text"])))
        assert g["text"] == r["text"] and g["dom"] == r["dom"]
    assert got[-1]["hk"] < min(g["hk"] for g in got[:20])


def test_score_options_and_jobs(corpus, tmp_path):
    path, rows = corpus
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    args = ["--tokenizer", "reported", "--min-tokens", "10", "--estimator", "gao", "--score-field", "s"]
    assert main(["score", str(path), "-o", str(a), "--quiet", *args]) == 0
    assert main(["score", str(path), "-o", str(b), "--quiet", "--jobs", "2", *args]) == 0
    assert _read(a) == _read(b)
    assert _read(a)[0]["s"] == pytest.approx(hk(rows[0]["text"], tokenizer="reported", min_tokens=10,
                                                 estimator="gao"))


def test_filter_keep_frac_per_domain(corpus, tmp_path):
    path, rows = corpus
    out = tmp_path / "kept.jsonl"
    assert main(["filter", str(path), "-o", str(out), "--keep-frac", "0.5", "--domain-field", "dom",
                 "--quiet"]) == 0
    kept = _read(out)
    scores = {r["id"]: hk(r["text"]) for r in rows}
    for d in "abc":
        mine = [r["id"] for r in rows if r["dom"] == d]
        k = round(0.5 * len(mine))
        ranked = sorted(mine, key=lambda i: (scores[i] is None, -(scores[i] or 0), i))
        assert sorted(r["id"] for r in kept if r["dom"] == d) == sorted(ranked[:k])
    assert 20 not in {r["id"] for r in kept} and 21 not in {r["id"] for r in kept}


def test_filter_threshold_and_stdin(corpus, tmp_path):
    path, rows = corpus
    out = tmp_path / "t.jsonl"
    thr = sorted(s for s in (hk(r["text"]) for r in rows) if s is not None)[10]
    proc = subprocess.run([sys.executable, "-m", "neurips26", "entropy-filter", "filter", "-", "-o", str(out),
                           "--threshold", str(thr)], input=path.read_text(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    kept = _read(out)
    assert kept and all(r["hk"] >= thr for r in kept)
    assert len(kept) == sum(1 for r in rows if (s := hk(r["text"])) is not None and s >= thr)


def test_top_level_cli_routes(corpus, tmp_path):
    path, _ = corpus
    out = tmp_path / "o.jsonl"
    assert top_main(["entropy-filter", "score", str(path), "-o", str(out), "--quiet"]) == 0
    assert out.is_file()


@pytest.mark.parametrize("content, word", [
    ('{"text": "a b c"}\n{not json\n', "line 2: malformed JSON"),
    ('{"text": "a b c"}\n{"body": "x"}\n', "line 2: missing text field 'text'"),
    ('{"text": "a b c"}\n\n{"text": 3}\n', "line 3: field 'text' must be a string"),
    ('[1, 2]\n', "line 1: expected a JSON object"),
])
def test_bad_lines_no_partial_output(tmp_path, capsys, content, word):
    src = tmp_path / "bad.jsonl"
    src.write_text(content)
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert word in err and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == [src]  # no output, no temporary file left


@pytest.mark.parametrize("argv, word", [
    (["score", "IN", "-o", "OUT", "--n-trunc", "1"], "--n-trunc"),
    (["score", "IN", "-o", "OUT", "--min-tokens", "x"], "--min-tokens"),
    (["filter", "IN", "-o", "OUT", "--keep-frac", "0"], "--keep-frac"),
    (["filter", "IN", "-o", "OUT", "--keep-frac", "1.5"], "--keep-frac"),
    (["filter", "IN", "-o", "OUT"], "--keep-frac"),
    (["filter", "IN", "-o", "OUT", "--threshold", "nan"], "threshold"),
    (["score", "IN", "-o", "OUT", "--jobs", "0"], "--jobs"),
    (["score", "IN", "-o", "OUT", "--estimator", "lz"], "--estimator"),
    (["score", "IN", "-o", "OUT", "--estimator", "sliding_window", "--overlap"], "overlap"),
    ([], "sub-command"),
])
def test_bad_options(tmp_path, capsys, argv, word):
    argv = [str(tmp_path / "in.jsonl") if a == "IN" else str(tmp_path / "o.jsonl") if a == "OUT" else a
            for a in argv]
    assert main(argv) == 2
    assert word in capsys.readouterr().err


def test_missing_input_and_domain_field(corpus, tmp_path, capsys):
    path, _ = corpus
    assert main(["score", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "o.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["filter", str(path), "-o", str(tmp_path / "o.jsonl"), "--keep-frac", "0.5",
                 "--domain-field", "lang", "--quiet"]) == 2
    assert "missing domain field 'lang'" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()
    assert main(["filter", "-", "-o", str(tmp_path / "o.jsonl"), "--keep-frac", "0.5"]) == 2
    assert "two passes" in capsys.readouterr().err
