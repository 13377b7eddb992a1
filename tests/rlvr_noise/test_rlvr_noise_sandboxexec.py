import os

import pytest

from neurips26.rlvr_noise.sandboxexec import code_rewards, nitrobox_status, run_python_jobs

PROGS = ["def add(a, b):\n    return a + b", "def add(a, b):\n    return a - b",
         "def add(a, b):\n    while True: pass"]
TESTS = ["assert add(2, 3) == 5"] * 3


def test_code_rewards_process():
    assert code_rewards(PROGS, TESTS, executor="process", timeout=2.0) == [1, 0, 0]


def test_code_rewards_bad_input():
    with pytest.raises(ValueError, match="length"):
        code_rewards(PROGS, TESTS[:1])
    with pytest.raises(ValueError, match="executor"):
        code_rewards(PROGS, TESTS, executor="docker")
    with pytest.raises(ValueError, match="timeout"):
        code_rewards(PROGS, TESTS, timeout=0.0)
    with pytest.raises(ValueError, match="jobs"):
        run_python_jobs([])


def test_code_rewards_nitrobox_equal_process():
    ok, why = nitrobox_status()
    if not ok:
        pytest.skip(f"nitrobox sandbox not available: {why}")
    assert code_rewards(PROGS, TESTS, executor="nitrobox", timeout=2.0) == [1, 0, 0]
    # the sandbox sees its own files only: a write outside the job's dir does not reach the host
    r = run_python_jobs([("open('/tmp/rlvr-nbx-probe', 'w').write('x')", {})], executor="nitrobox")[0]
    assert r.exit_code == 0 and not os.path.exists("/tmp/rlvr-nbx-probe")
