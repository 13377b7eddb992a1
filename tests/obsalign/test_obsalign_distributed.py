"""Scale-out: torch.distributed, one rank per source (gloo, CPU) == the in-process round loop."""

import numpy as np
import pytest
import torch

from neurips26.obsalign.federation import FedConfig, run_federation
from neurips26.obsalign.obsbench import SourceSpec, make_obsbench


@pytest.mark.slow
def test_one_rank_per_source_gives_the_in_process_omega_and_models():
    from neurips26.obsalign.distributed import spawn_sources

    specs = [SourceSpec((0, 1), None, 60), SourceSpec((0, 2), None, 60, label_fraction=0.2),
             SourceSpec((1, 2), tuple(range(3, 12)), 50, eta=0.3)]
    bench = make_obsbench(0, specs, unimodal_per_class=2)
    cfg = FedConfig(rounds=3, epochs=1, warmup=1)
    ref = run_federation(bench, "obsalign", cfg, seed=0, eval_every_round=False)
    ranks = spawn_sources(bench, "obsalign", cfg, seed=0)
    assert len(ranks) == 3
    for r in ranks:
        assert len(r.omega_history) == 3
        np.testing.assert_allclose(r.omega, ref.omega, atol=1e-5)      # same omega on every rank
        for a, b in zip(r.omega_history, ref.omega_history):
            np.testing.assert_allclose(a, b, atol=1e-5)
        own = ref.models[r.rank].state_dict()
        for k, v in r.state.items():
            assert torch.allclose(v, own[k], atol=1e-4), k
    assert ref.omega.max() > 0                                          # guidance was on in rounds 2-3


def test_run_rank_refuses_without_a_process_group():
    from neurips26.obsalign.distributed import run_rank

    bench = make_obsbench(0, [SourceSpec((0, 1), None, 20)], unimodal_per_class=1)
    with pytest.raises(RuntimeError, match="process group"):
        run_rank(bench, "obsalign")
