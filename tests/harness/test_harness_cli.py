import json
import subprocess
import sys

import pytest

from neurips26.cli import main


def _run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv, needle", [
    (["run", "nope"], "unknown paper 'nope'"),
    (["run", "toy_paper", "--scale", "huge"], "has scales full, quick, smoke; got 'huge'"),
    (["run", "toy_paper", "--seed", "-3"], "seed must be a non-negative integer"),
    (["run", "toy_paper", "--seed", "abc"], "seed must be a non-negative integer"),
    (["bench", "nope"], "unknown paper"),
    (["reproduce", "--only", "toy_paper,nope"], "unknown paper 'nope'"),
    (["frobnicate"], "invalid choice"),
])
def test_user_errors_are_one_line_exit_2(capsys, toy_paper, argv, needle):
    rc, out, err = _run(capsys, *argv)
    assert rc == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1 and err.startswith("neurips26: error:")
    assert "Traceback" not in err


def test_unwritable_out_dir_exit_2(capsys, toy_paper, tmp_path):
    (tmp_path / "file").write_text("")
    for out in (tmp_path / "file" / "sub", "/proc/neurips26-cannot-be-here"):
        rc, _, err = _run(capsys, "run", "toy_paper", "--out", str(out))
        assert rc == 2 and "not writable" in err and len(err.strip().splitlines()) == 1


def test_planned_paper_exit_2(capsys):
    from neurips26.harness import registry

    planned = [p.slug for p in registry.PAPERS if not p.implemented]
    if not planned:
        pytest.skip("every paper is implemented")
    rc, _, err = _run(capsys, "run", planned[0])
    assert rc == 2 and "planned" in err


def test_run_prints_claims_and_writes_result(capsys, toy_paper, tmp_path):
    rc, out, _ = _run(capsys, "run", "toy_paper", "--out", str(tmp_path), "--seed", "1")
    assert rc == 0
    assert "mean_small" in out and "holds" in out and "fails" in out
    data = json.loads((tmp_path / "result.json").read_text())
    assert data["seed"] == 1 and data["scale"] == "quick"


def test_run_json_mode_prints_the_result(capsys, toy_paper, tmp_path):
    rc, out, _ = _run(capsys, "run", "toy_paper", "--out", str(tmp_path), "--json")
    assert rc == 0
    assert json.loads(out) == json.loads((tmp_path / "result.json").read_text())


def test_bench_prints_ratio(capsys, toy_paper, tmp_path):
    rc, out, _ = _run(capsys, "bench", "toy_paper", "--out", str(tmp_path))
    assert rc == 0 and "2.00x" in out and "not installed" in out
    assert (tmp_path / "bench.json").is_file()


def test_reproduce_then_report(capsys, toy_paper, tmp_path):
    rc, out, _ = _run(capsys, "reproduce", "--only", "toy_paper", "--root", str(tmp_path), "--bench")
    assert rc == 0
    assert (tmp_path / "report.html").is_file() and (tmp_path / "report.md").is_file()
    assert len(list(tmp_path.glob("toy_paper/run-*/result.json"))) == 1
    assert len(list(tmp_path.glob("toy_paper/bench-*/bench.json"))) == 1
    (tmp_path / "report.html").unlink()
    rc, out, _ = _run(capsys, "report", "--root", str(tmp_path))
    assert rc == 0 and (tmp_path / "report.html").is_file()


def test_report_without_results_exit_2(capsys, tmp_path):
    rc, _, err = _run(capsys, "report", "--root", str(tmp_path / "none"))
    assert rc == 2 and "does not exist" in err


def test_console_script_help_and_list():
    out = subprocess.run([sys.executable, "-m", "neurips26", "--help"], capture_output=True, text=True)
    for cmd in ("list", "run", "bench", "reproduce", "report", "entropy-filter", "nitrobox"):
        assert cmd in out.stdout
    for sub in ("run", "bench", "reproduce", "report"):
        h = subprocess.run([sys.executable, "-m", "neurips26", sub, "--help"], capture_output=True, text=True)
        assert h.returncode == 0 and "usage:" in h.stdout


def test_reproduce_continues_after_a_crash(capsys, toy_paper, tmp_path, monkeypatch):
    import sys as _sys

    exp = _sys.modules["neurips26.toy_paper.experiment"]

    def boom(cfg, ctx):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(exp, "run", boom)
    rc, out, err = _run(capsys, "reproduce", "--only", "toy_paper", "--root", str(tmp_path))
    assert rc == 1
    assert "kaboom" in err and "toy_paper failed" in err and "not run: toy_paper" in err
    assert (tmp_path / "report.html").is_file()  # the report is still written


def test_paper_tool_commands_route_to_the_paper(capsys):
    from neurips26.harness import registry

    for paper in registry.PAPERS:
        if paper.command and paper.implemented:
            with pytest.raises(SystemExit) as e:
                main([paper.command, "--help"])
            assert e.value.code == 0
            assert "usage:" in capsys.readouterr().out


def test_reproduce_resume_skips_what_this_commit_already_ran(capsys, toy_paper, tmp_path, monkeypatch):
    from neurips26.harness import run as run_mod

    monkeypatch.setattr(run_mod, "git_sha", lambda: "a" * 40)
    argv = ("reproduce", "--only", "toy_paper", "--root", str(tmp_path), "--bench", "--resume")
    assert _run(capsys, *argv)[0] == 0
    rc, out, _ = _run(capsys, *argv)                       # the same commit: nothing runs again
    assert rc == 0 and "resumed: already run" in out and "resumed: bench already run" in out
    assert "mean_small" in out                             # the claims are still printed, from the old run
    assert len(list(tmp_path.glob("toy_paper/run-*"))) == 1 and len(list(tmp_path.glob("toy_paper/bench-*"))) == 1
    _run(capsys, "reproduce", "--only", "toy_paper", "--root", str(tmp_path), "--resume", "--seed", "5")
    assert len(list(tmp_path.glob("toy_paper/run-*"))) == 2   # another seed is another run
    monkeypatch.setattr(run_mod, "git_sha", lambda: "b" * 40)
    _run(capsys, *argv)                                    # a new commit runs again
    assert len(list(tmp_path.glob("toy_paper/run-*"))) == 3 and len(list(tmp_path.glob("toy_paper/bench-*"))) == 2
    monkeypatch.setattr(run_mod, "git_sha", lambda: "b" * 40 + "-dirty")
    _run(capsys, *argv)                                    # a dirty checkout cannot tell: it runs
    assert len(list(tmp_path.glob("toy_paper/run-*"))) == 4
