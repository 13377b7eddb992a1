"""harness.distributed.launch_local: every rank in one process group, results in rank order, errors surface."""
import pytest

torch = pytest.importorskip("torch")

from neurips26.harness.distributed import launch_local  # noqa: E402


def _all_reduce_rank(scale: int):
    import torch.distributed as dist

    t = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(t)
    return {"rank": dist.get_rank(), "world": dist.get_world_size(), "sum": float(t) * scale,
            "threads": torch.get_num_threads()}


def _fail_on_rank_one():
    import torch.distributed as dist

    if dist.get_rank() == 1:
        raise ValueError("rank one refuses")
    return dist.get_rank()


def _sleep_forever():
    import time

    time.sleep(600)


def test_every_rank_joins_one_group_and_results_come_back_in_rank_order():
    out = launch_local(_all_reduce_rank, 10, world=3, start_method="fork")
    assert [o["rank"] for o in out] == [0, 1, 2]
    assert all(o["world"] == 3 and o["sum"] == 60.0 and o["threads"] == 1 for o in out)


def test_a_rank_that_raises_makes_the_launch_raise_with_its_error():
    with pytest.raises(Exception, match="rank one refuses"):
        launch_local(_fail_on_rank_one, world=2, start_method="fork")


def test_timeout_kills_the_ranks():
    with pytest.raises(TimeoutError, match="timeout"):
        launch_local(_sleep_forever, world=2, start_method="fork", timeout=2)


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="world"):
        launch_local(_all_reduce_rank, 1, world=0)
    with pytest.raises(ValueError, match="start_method"):
        launch_local(_all_reduce_rank, 1, start_method="thread")
    with pytest.raises(TypeError, match="fn"):
        launch_local("not a function")
