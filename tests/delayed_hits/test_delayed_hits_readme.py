"""Every Python code block of the folder README runs, as written (in a scratch folder)."""

import re
from pathlib import Path

import pytest

from neurips26.delayed_hits import write_atre
from neurips26.delayed_hits.workloads import irm_zipf

README = Path(__file__).resolve().parents[2] / "src" / "neurips26" / "delayed_hits" / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_code_blocks_and_generated_tables():
    text = README.read_text()
    assert len(BLOCKS) >= 2
    for name in ("claims", "bench"):
        assert f"<!-- neurips26:{name} -->" in text and f"<!-- /neurips26:{name} -->" in text
    assert "neurips26 run delayed_hits" in text


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_readme_block_runs(k, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_atre(irm_zipf(500, 4000, 0.8, seed=1)[0], tmp_path / "my_trace.csv")   # the user's trace
    namespace: dict = {}
    exec(compile(BLOCKS[k], f"README block {k}", "exec"), namespace)
    out = capsys.readouterr().out
    assert out.strip(), "every README block prints its result"
    if "res" in namespace:                      # the first block: a simulation result
        res = namespace["res"]
        assert 0 < res.mean_latency <= 10 and res.static_regret() == res.total_latency - res.static_opt()
    if "rows" in namespace:                     # the sweep block: the full grid came back
        assert len(namespace["rows"]) == 8 and {r["Z"] for r in namespace["rows"]} == {1, 10}
