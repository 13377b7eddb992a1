"""Issue 30, items 2-3 through the CLI: compression by extension, --on-error raise|skip|quarantine with
line numbers, the surrogate / invalid-byte policy, --text-field / --id-field, attributes-only output,
and the one null policy of --keep-frac."""

import bz2
import gzip
import json
import lzma

import numpy as np
import pytest

from neurips26.entropy_filter import hk
from neurips26.entropy_filter.cli import main

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho".split()


def _doc(i, n=120):
    rng = np.random.default_rng(i)
    return " ".join(WORDS[k] + str(rng.integers(0, 3 + i)) for k in rng.integers(0, len(WORDS), n))


def _lines(rows):
    return "".join(json.dumps(r) + "\n" for r in rows)


def _read(path):
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_lone_surrogate_policy(tmp_path, capsys):
    """issue 30: {"text": "... \\ud800 ..."} crashed with a UnicodeEncodeError traceback, exit 1."""
    src = tmp_path / "in.jsonl"
    src.write_text(
        _lines([{"id": "a", "text": _doc(1)}]) + '{"id": "b", "text": "%s \\ud800 tail"}\n' % _doc(2)
    )
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "-o", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "line 2: lone surrogate" in err and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # nothing written
    assert main(["score", str(src), "-o", str(out), "--quiet", "--bad-unicode", "replace"]) == 0
    got = _read(out)
    assert got[1]["text"].endswith("\ufffd tail") and got[1]["hk"] == pytest.approx(
        hk(_doc(2) + " \ufffd tail")
    )
    assert main(["score", str(src), "-o", str(out), "--quiet", "--bad-unicode", "keep"]) == 0
    line2 = out.read_text().splitlines()[1]
    assert (
        "\\ud800" in line2 and json.loads(line2)["text"] == _doc(2) + " \ud800 tail"
    )  # written back as read


def test_invalid_utf8_skip_and_quarantine(tmp_path, capsys):
    """issue 30: one invalid UTF-8 byte aborted the whole file, with no line number and no skip policy."""
    src = tmp_path / "in.jsonl"
    good = [{"id": i, "text": _doc(i)} for i in range(3)]
    src.write_bytes(
        _lines(good[:1]).encode()
        + b'{"id": 9, "text": "caf\xe9 au lait"}\n'
        + b"{broken\n"
        + _lines(good[1:]).encode()
    )
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "-o", str(out), "--quiet"]) == 2
    assert "line 2: invalid UTF-8 at byte" in capsys.readouterr().err and not out.exists()
    assert main(["score", str(src), "-o", str(out), "--quiet", "--on-error", "skip"]) == 0
    assert [r["id"] for r in _read(out)] == [0, 1, 2]
    assert "2 bad record(s) skipped" in capsys.readouterr().err
    q = tmp_path / "bad.jsonl"
    assert (
        main(
            ["score", str(src), "-o", str(out), "--quiet", "--on-error", "quarantine", "--quarantine", str(q)]
        )
        == 0
    )
    bad = _read(q)
    assert (
        [b["line"] for b in bad] == [2, 3]
        and "invalid UTF-8" in bad[0]["error"]
        and "malformed" in bad[1]["error"]
    )
    assert (
        main(["score", str(src), "-o", str(out), "--quiet", "--bad-unicode", "replace", "--on-error", "skip"])
        == 0
    )
    assert [r["id"] for r in _read(out)] == [0, 9, 1, 2] and _read(out)[1]["text"] == "caf\ufffd au lait"
    assert main(["score", str(src), "-o", str(out), "--on-error", "quarantine"]) == 2
    assert "--quarantine FILE" in capsys.readouterr().err


@pytest.mark.parametrize(
    "ext, opener", [(".gz", gzip.open), (".bz2", bz2.open), (".xz", lzma.open), (".zst", None)]
)
def test_compressed_input_and_output(tmp_path, ext, opener):
    """issue 30: `.jsonl.gz` was read as bytes and failed like an invalid byte."""
    if ext == ".zst":
        zstd = pytest.importorskip("zstandard", reason="zstandard not installed")

        def opener(path, mode):
            f = open(path, mode.replace("t", "") if "b" in mode else mode[0] + "b")
            return (
                zstd.ZstdCompressor().stream_writer(f)
                if "w" in mode
                else zstd.ZstdDecompressor().stream_reader(f)
            )

    rows = [{"id": i, "text": _doc(i)} for i in range(5)]
    src = tmp_path / f"in.jsonl{ext}"
    with opener(src, "wb") as f:
        f.write(_lines(rows).encode())
    out = tmp_path / f"out.jsonl{ext}"
    assert main(["score", str(src), "-o", str(out), "--quiet"]) == 0
    with opener(out, "rb") as f:
        got = [json.loads(x) for x in f.read().decode().splitlines()]
    assert [g["hk"] for g in got] == [pytest.approx(hk(r["text"])) for r in rows]


def test_fields_and_attributes_only_output(tmp_path):
    rows = [{"meta": {"doc_id": f"d{i}"}, "body": {"content": _doc(i)}} for i in range(4)]
    rows.append({"meta": {}, "body": {"content": "short"}})
    src = tmp_path / "in.jsonl"
    src.write_text(_lines(rows))
    out = tmp_path / "attrs.jsonl"
    assert (
        main(
            [
                "score",
                str(src),
                "-o",
                str(out),
                "--quiet",
                "--text-field",
                "body.content",
                "--id-field",
                "meta.doc_id",
                "--attributes",
            ]
        )
        == 0
    )
    got = _read(out)
    assert [g["id"] for g in got] == ["d0", "d1", "d2", "d3", 5]  # missing id: the line number
    for g, r in zip(got, rows):
        text = r["body"]["content"]
        assert set(g) == {"id", "attributes"}  # the corpus itself is not rewritten
        (span,) = g["attributes"]["hk"]
        assert span[:2] == [0, len(text)] and span[2] == (
            None if hk(text) is None else pytest.approx(hk(text))
        )


def test_keep_frac_null_policy_and_rounding(tmp_path, capsys):
    """issue 30: --keep-frac filled a domain's quota with unscorable documents, and round-half-even
    kept 0 of a 1-document domain."""
    rows = [{"id": i, "text": _doc(i), "dom": "a"} for i in range(2)]
    rows += [{"id": 10 + i, "text": "too short", "dom": "a"} for i in range(4)]
    rows.append({"id": 20, "text": _doc(20), "dom": "solo"})
    src = tmp_path / "in.jsonl"
    src.write_text(_lines(rows))
    out = tmp_path / "kept.jsonl"
    assert (
        main(["filter", str(src), "-o", str(out), "--keep-frac", "0.5", "--domain-field", "dom", "--quiet"])
        == 0
    )
    assert sorted(r["id"] for r in _read(out)) == [0, 1, 20]  # quota 3 of "a": only 2 scored
    assert "4 unscored, never kept" in capsys.readouterr().err
    assert (
        main(
            [
                "filter",
                str(src),
                "-o",
                str(out),
                "--keep-frac",
                "0.4",
                "--domain-field",
                "dom",
                "--quiet",
                "--min-keep",
                "0",
            ]
        )
        == 0
    )
    assert 20 not in {r["id"] for r in _read(out)}  # asked for: rounding may drop it
    floor = max(hk(_doc(0)), hk(_doc(1))) - 1e-9
    assert (
        main(
            [
                "filter",
                str(src),
                "-o",
                str(out),
                "--keep-frac",
                "1.0",
                "--domain-field",
                "dom",
                "--quiet",
                "--floor",
                str(floor),
            ]
        )
        == 0
    )
    assert all(r["hk"] >= floor for r in _read(out))


def test_unicode_corpus_and_hf_tokenizer_through_cli(tmp_path):
    tk = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    ru = ["Привет мир, как дела? " * 30, " ".join(f"слово{i % 37} дом{i % 11}" for i in range(200))]
    src = tmp_path / "ru.jsonl"
    src.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in ru))
    out = tmp_path / "o.jsonl"
    assert main(["score", str(src), "-o", str(out), "--quiet"]) == 0
    s = [r["hk"] for r in _read(out)]
    assert None not in s and s[0] < s[1]
    tok = tk.Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(ru, trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    assert main(["score", str(src), "-o", str(out), "--quiet", "--tokenizer", str(path), "--jobs", "2"]) == 0
    assert [r["hk"] for r in _read(out)] == [pytest.approx(hk(t, tokenizer=str(path))) for t in ru]
    assert main(["score", str(src), "-o", str(out), "--quiet", "--tokenizer", str(tmp_path / "no.json")]) == 2
