"""Generated README tables: blocks between markers, rewritten from the newest runs."""

import pytest

from neurips26.harness import readme
from neurips26.harness.run import bench_paper, run_paper

FOLDER_README = """# toy

Intro text kept as is.

<!-- neurips26:claims -->
stale table
<!-- /neurips26:claims -->

Middle text.

<!-- neurips26:bench -->
<!-- /neurips26:bench -->
"""

TOP_README = """# project
<!-- neurips26:papers -->
old
<!-- /neurips26:papers -->
tail
"""


def test_replace_block_only_touches_the_block():
    out = readme.replace_block(FOLDER_README, "claims", "NEW")
    assert "NEW\n<!-- /neurips26:claims -->" in out and "stale" not in out
    assert out.startswith("# toy\n\nIntro text kept as is.") and "Middle text." in out
    with pytest.raises(ValueError, match="markers"):
        readme.replace_block("no markers", "claims", "x")
    with pytest.raises(ValueError, match="name"):
        readme.replace_block(FOLDER_README, "nope", "x")


def test_update_readmes_from_runs_in_sync(toy_paper, tmp_path):
    root = tmp_path / "runs"
    res = run_paper("toy_paper", "quick", seed=0, out=root / "toy_paper" / "run-1", progress=False)
    bench_paper("toy_paper", root / "toy_paper" / "bench-1", progress=False)
    pkg = tmp_path / "src" / "neurips26"
    (pkg / "toy_paper").mkdir(parents=True)
    folder = pkg / "toy_paper" / "README.md"
    folder.write_text(FOLDER_README)
    top = tmp_path / "README.md"
    top.write_text(TOP_README)
    changed = readme.update_readmes(root, package_dir=pkg, top_readme=top)
    assert set(changed) == {folder, top}
    text = folder.read_text()
    assert readme.render_claims(res) in text and "stale table" not in text
    assert "neurips26 run toy_paper --scale quick --seed 0" in text
    for c in res["claims"]:
        assert f"**{c['verdict']}**" in text
    assert "| speed | 2 | anchor | 4 | s | 2x |" in text
    assert "[`toy_paper`](src/neurips26/toy_paper/README.md)" in top.read_text()
    assert top.read_text().endswith("tail\n")
    # a second pass over the same runs changes nothing: the blocks are in sync
    assert readme.update_readmes(root, package_dir=pkg, top_readme=top) == []


def test_cli_report_readme(toy_paper, tmp_path, capsys):
    from neurips26.cli import main

    root = tmp_path / "runs"
    run_paper("toy_paper", "smoke", out=root / "toy_paper" / "run-1", progress=False)
    assert main(["report", "--root", str(root)]) == 0
    assert "report:" in capsys.readouterr().out


def test_papers_table_keeps_rows_of_papers_without_a_run(tmp_path):
    """Regenerating after rerunning some papers keeps the other papers' claims cells as they were."""
    from neurips26.harness.registry import PAPERS

    slugs = [p.slug for p in PAPERS]
    kept = "5 holds, 0 fails, 1 inconclusive (quick, 3 seeds, 99 s, git `abcdef0123`)"
    previous = ("| slug | paper | status | claims (newest run) |\n|---|---|---|---|\n"
                f"| [`{slugs[0]}`](src/neurips26/{slugs[0]}/README.md) | a \\| b | implemented | {kept} |\n")
    top = tmp_path / "README.md"
    top.write_text(f"# p\n<!-- neurips26:papers -->\n{previous}<!-- /neurips26:papers -->\n")
    readme.update_readmes(tmp_path / "no-runs", package_dir=tmp_path / "pkg", top_readme=top)
    rows = {line.split(" | ")[0]: line for line in top.read_text().splitlines() if line.startswith("| [")}
    assert rows[f"| [`{slugs[0]}`](src/neurips26/{slugs[0]}/README.md)"].endswith(f"| {kept} |")
    assert all(line.endswith("| — |") for key, line in rows.items() if slugs[0] not in key)
    assert readme._previous_claims(readme.render_papers([], previous)) == {}
