"""Every python code block of the folder README runs; every command it shows is a `neurips26` command of
this paper with a scale it has."""

import re
import shlex
from pathlib import Path

import pytest

pytest.importorskip("transformers")

SLUG = "cofrgenet"
README = Path(__file__).resolve().parents[2] / "src" / "neurips26" / SLUG / "README.md"
TEXT = README.read_text()
PY_BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)
SH_BLOCKS = re.findall(r"```bash\n(.*?)```", TEXT, re.S)


def test_readme_has_generated_tables_and_code():
    assert PY_BLOCKS and SH_BLOCKS
    for name in ("claims", "bench"):
        assert f"<!-- neurips26:{name} -->" in TEXT and f"<!-- /neurips26:{name} -->" in TEXT


# a block that runs a whole reproduction (run_paper) takes minutes: it runs in the slow suite
CASES = [pytest.param(i, marks=pytest.mark.slow) if "run_paper(" in b else i for i, b in enumerate(PY_BLOCKS)]


@pytest.mark.parametrize("i", CASES)
def test_readme_python_block_runs(i, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(PY_BLOCKS[i], f"{README.name} python block {i}", "exec"), {"__name__": "__readme__"})


def test_readme_commands_name_this_paper_and_its_scales():
    from neurips26.cofrgenet.experiment import CONFIGS

    cmds = [line.split("#")[0].strip() for b in SH_BLOCKS for line in b.splitlines()]
    runs = [shlex.split(c) for c in cmds if c.startswith("neurips26 ")]
    assert runs
    for argv in runs:
        assert argv[1] in ("run", "bench", "report") and argv[2] == SLUG, argv
        if "--scale" in argv:
            assert argv[argv.index("--scale") + 1] in CONFIGS, argv
