"""ObsAlign: observability-gated cross-modal alignment across sources that see different modalities.

    from neurips26.obsalign import make_obsbench, run_federation, unimodal_accuracy
    bench = make_obsbench(seed=0)                                   # ObsBench quick layout, 5 sources
    res = run_federation(bench, "obsalign"); print(res.omega.shape)  # omega[m, m', c] after R rounds
"""

from neurips26.obsalign.consolidation import Weights, consolidate, evidence_weights, fedavg_weights
from neurips26.obsalign.federation import (METHODS, FedConfig, FedResult, Method, guidance_for,
                                           run_centralised, run_federation, source_accuracy,
                                           unimodal_accuracy)
from neurips26.obsalign.model import Guidance, ObsModel, local_loss, predict
from neurips26.obsalign.obsbench import (MODALITIES, ObsBench, Source, SourceSpec, Split, full_sources,
                                         make_obsbench, quick_sources)
from neurips26.obsalign.observability import (ObservabilityTracker, OmegaParams, calibrate, kappa_neg,
                                              omega_raw, reliability, signals, transfer_weight)
from neurips26.obsalign.semireal import make_digits_tri, make_healthcare
from neurips26.obsalign.sketch import Pooled, Sketch, build_sketch, pool

__all__ = ["make_obsbench", "ObsBench", "Source", "SourceSpec", "Split", "MODALITIES", "quick_sources",
           "full_sources",
           "Sketch", "Pooled", "build_sketch", "pool", "OmegaParams", "ObservabilityTracker", "signals",
           "omega_raw", "calibrate", "kappa_neg", "reliability", "transfer_weight", "ObsModel", "Guidance",
           "local_loss", "predict", "Weights", "fedavg_weights", "evidence_weights", "consolidate", "Method",
           "METHODS", "FedConfig", "FedResult", "run_federation", "run_centralised",
           "guidance_for", "source_accuracy",
           "unimodal_accuracy", "make_healthcare", "make_digits_tri"]
