"""map_tasks: order, failures per task, one meaning of auto."""

import os

import pytest

from neurips26.harness import parallel
from neurips26.harness.parallel import TaskError, TaskFailure, map_tasks, resolve_backend


def square(x):
    return x * x


def boom_on_3(x):
    if x == 3:
        raise ValueError("three is bad")
    return x


def pid_of(_):
    return os.getpid()


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_order_kept(backend):
    assert map_tasks(square, range(7), backend=backend, workers=2, progress=False) == [x * x for x in range(7)]


def test_process_backend_uses_other_processes():
    pids = set(map_tasks(pid_of, range(4), backend="process", workers=2, progress=False, mp_start="fork"))
    assert os.getpid() not in pids


@pytest.mark.parametrize("backend", ["serial", "process"])
def test_failures_reported_per_task_after_all_ran(backend):
    with pytest.raises(TaskError) as info:
        map_tasks(boom_on_3, range(6), backend=backend, workers=2, progress=False, mp_start="fork")
    err = info.value
    assert [f.index for f in err.failures] == [3]
    assert "three is bad" in err.failures[0].error and "task 3" in str(err)
    assert err.results[:3] == [0, 1, 2] and err.results[4:] == [4, 5]
    got = map_tasks(boom_on_3, range(5), backend=backend, workers=2, progress=False, on_error="return",
                    mp_start="fork")
    assert isinstance(got[3], TaskFailure) and got[4] == 4


def test_auto_means_ray_only_when_running_or_asked(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setattr(parallel, "ray_running", lambda: False)
    assert resolve_backend("auto", 10, None, None) == "process"
    assert resolve_backend("auto", 1, None, None) == "serial"
    assert resolve_backend("auto", 10, 1, None) == "serial"
    assert resolve_backend("auto", 10, None, "ray://host:10001") == "ray"
    monkeypatch.setattr(parallel, "ray_running", lambda: True)
    assert resolve_backend("auto", 10, None, None) == "ray"
    assert resolve_backend("serial", 10, None, None) == "serial"


def test_ray_running_reads_env(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert parallel.ray_running()


def test_bad_arguments():
    with pytest.raises(ValueError, match="backend"):
        map_tasks(square, [1], backend="threads")
    with pytest.raises(ValueError, match="workers"):
        map_tasks(square, [1], workers=0)
    with pytest.raises(TypeError, match="fn"):
        map_tasks(3, [1])
