"""Every Python code block of the bridge README runs."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "src" / "neurips26" / "bridge" / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_blocks_and_markers():
    text = README.read_text()
    assert len(BLOCKS) >= 3
    for name in ("claims", "bench"):
        assert f"<!-- neurips26:{name} -->" in text and f"<!-- /neurips26:{name} -->" in text


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_block_runs(i):
    exec(compile(BLOCKS[i], f"README block {i}", "exec"), {})
