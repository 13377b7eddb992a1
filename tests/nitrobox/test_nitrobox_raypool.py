"""Issue 28 item 9: a pool across Ray nodes -- a local cluster of a head and one worker node."""

from __future__ import annotations

import pytest

from neurips26.nitrobox.diagnostics import support_problem

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(support_problem() is not None, reason=f"no sandbox support: {support_problem()}")]


def test_two_nodes_exec_files_and_node_loss(tmp_path):
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    from neurips26.nitrobox.raypool import RaySandboxPool, SandboxLostError

    state_root = f"/dev/shm/nbx-ray-{tmp_path.name}"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    worker = cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address)
    try:
        pool = RaySandboxPool({"state_root": state_root}, per_node=1, max_per_node=2)
        assert len(pool.nodes) == 2
        a, b = pool.acquire(), pool.acquire()
        assert a.node != b.node                                    # one sandbox on each node
        for h in (a, b):
            assert tuple(h.exec("echo hi")) == (0, "hi\n")
            h.write_file("/workspace/f", "x")
            assert h.read_file("/workspace/f") == b"x"
        lost = a if a.node == worker.node_id else b
        kept = b if lost is a else a
        cluster.remove_node(worker)                                # node loss
        with pytest.raises(SandboxLostError):
            lost.exec("true", timeout=30)
        again = pool.replace(lost)                                 # re-created on a live node
        assert again.node == kept.node and tuple(again.exec("echo back")) == (0, "back\n")
        pool.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
        from neurips26.nitrobox import maintenance

        maintenance.cleanup(state_root)  # what the killed node's sandboxes left
        import shutil

        shutil.rmtree(state_root, ignore_errors=True)
