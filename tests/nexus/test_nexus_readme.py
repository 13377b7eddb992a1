"""Every python code block of the folder README runs."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "src" / "neurips26" / "nexus" / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_has_code_blocks():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_block_runs(i):
    exec(compile(BLOCKS[i], f"README block {i}", "exec"), {})
