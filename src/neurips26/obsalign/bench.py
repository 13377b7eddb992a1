"""ObsAlign round vs FedAvg round (the anchor), its parts, and upload bytes (sketch vs parameters).

Rows: one whole round (all sources' local epochs + sketches + server work) of ObsAlign vs
FedAvg-NoAlign (target ratio >= 1/1.15) and vs FedAvg-AlwaysAlign (same loss terms, so the ratio is the
cost of sketches, omega and evidence-aware consolidation); local training, sketch build and server omega +
consolidation side by side; bytes uploaded per source, sketch vs parameters, in the encoder regime
(target < 15% at d = 32) and the VLM regime (reported). Timing through ``harness.bench.compare``.
"""

from __future__ import annotations

import numpy as np
import torch

from neurips26.harness.bench import BenchRow, compare
from neurips26.harness.run import RunContext
from neurips26.obsalign.consolidation import consolidate, fedavg_weights
from neurips26.obsalign.federation import (
    METHODS,
    FedConfig,
    guidance_for,
    modality_counts,
    server_step,
    shared_state,
    source_sketch,
    train_epochs,
)
from neurips26.obsalign.model import ObsModel
from neurips26.obsalign.obsbench import SCARCE_LABEL_FRACTION, make_obsbench, quick_sources
from neurips26.obsalign.observability import ObservabilityTracker

SIZES = {"smoke": dict(scale=0.15, rounds=3), "quick": dict(scale=1.0, rounds=7)}
UPLOAD_TARGET = 0.15


def _n_params(model: ObsModel, modalities) -> int:
    return sum(p.numel() for m in modalities for p in model.enc[m].parameters()) + model.cls.numel()


def bench(ctx: RunContext) -> list[BenchRow]:
    sz = SIZES["smoke" if ctx.scale == "smoke" else "quick"]
    torch.set_num_threads(1)
    specs = quick_sources(SCARCE_LABEL_FRACTION, scale=sz["scale"])   # the quick run's layout
    bench_ = make_obsbench(0, specs, unimodal_per_class=5)
    cfg = FedConfig()   # the quick run's d, E = 2 local epochs, batch
    C = bench_.n_classes
    torch.manual_seed(0)
    models = [ObsModel(bench_.dims, C, cfg.d) for _ in bench_.sources]
    opts = [torch.optim.Adam(m.parameters(), lr=cfg.lr) for m in models]
    gen = torch.Generator().manual_seed(0)
    mod_counts = np.stack([modality_counts(s.train, s.spec.modalities) for s in bench_.sources])
    sizes = np.array([len(s.train) for s in bench_.sources], float)
    obs = METHODS["obsalign"]
    tracker = ObservabilityTracker(obs.omega, cfg.beta)
    state = {"guid": [None] * len(models)}

    def sketches():
        return [
            source_sketch(m, s.train, s.spec.modalities, None, cfg) for m, s in zip(models, bench_.sources)
        ]

    sk0 = sketches()
    p0, _, state["guid"], _ = server_step(obs, cfg, tracker, sk0, mod_counts, sizes, C)

    def local(guided: bool):
        for i, (m, s) in enumerate(zip(models, bench_.sources)):
            train_epochs(
                m, opts[i], s.train, s.spec.modalities, state["guid"][i] if guided else None, cfg, gen
            )

    def server_obs(sks):
        _, _, state["guid"], w = server_step(obs, cfg, tracker, sks, mod_counts, sizes, C)
        return consolidate([shared_state(m) for m in models], w)

    def server_fedavg():
        return consolidate([shared_state(m) for m in models], fedavg_weights(mod_counts, sizes, C))

    def round_obs():
        local(True)
        new, _ = server_obs(sketches())
        for m, st in zip(models, new):
            m.load_state_dict(st)

    def round_fedavg():
        local(False)
        new, _ = server_fedavg()
        for m, st in zip(models, new):
            m.load_state_dict(st)

    always = [guidance_for(METHODS["alwaysalign"], p0, None, None, cfg) for _ in models]

    def round_always():
        for i, (m, s) in enumerate(zip(models, bench_.sources)):
            train_epochs(m, opts[i], s.train, s.spec.modalities, always[i], cfg, gen)
        new, _ = server_fedavg()
        for m, st in zip(models, new):
            m.load_state_dict(st)

    shape = (f"{len(models)} sources, {int(sizes.sum())} training samples, {cfg.epochs} local epochs, d={cfg.d}, "
             "1 thread")
    r = sz["rounds"]
    rows = [
        compare(
            "round (ObsAlign vs FedAvg-NoAlign)",
            round_obs,
            round_fedavg,
            "FedAvg-NoAlign round",
            unit="ms",
            rounds=r,
            note=f"{shape}; target ratio >= {1 / 1.15:.2f}",
        ),
        compare(
            "round (ObsAlign vs FedAvg-AlwaysAlign)",
            round_obs,
            round_always,
            "FedAvg-AlwaysAlign round",
            unit="ms",
            rounds=r,
            note=f"{shape}; isolates sketches + omega + evidence-aware consolidation from the loss terms",
        ),
        compare(
            "local training (guided vs CE only)",
            lambda: local(True),
            lambda: local(False),
            "FedAvg-NoAlign local epochs",
            unit="ms",
            rounds=r,
            note=shape,
        ),
        compare(
            "sketch build (all sources)",
            sketches,
            None,
            "FedAvg (no sketch)",
            unit="ms",
            rounds=r,
            missing="FedAvg builds no sketch",
            note=shape,
        ),
        compare(
            "server: omega + evidence-aware consolidation",
            lambda: server_obs(sk0),
            server_fedavg,
            "FedAvg consolidation",
            unit="ms",
            rounds=r,
            note=shape,
        ),
    ]
    for regime in ("encoder", "vlm"):
        d = cfg.d
        b = (
            bench_
            if regime == "encoder"
            else make_obsbench(0, specs, unimodal_per_class=5, regime="vlm", d_vlm=d)
        )
        mdl = ObsModel(b.dims, C, d, regime=regime)
        ratios, sk_f, par_f = [], [], []
        for s in b.sources:
            k = len(s.spec.modalities)
            sk = k * C * (d + 2) + k * (k - 1) * C
            par = _n_params(mdl, s.spec.modalities)
            ratios.append(sk / par)
            sk_f.append(sk)
            par_f.append(par)
        target = f"target < {UPLOAD_TARGET:.0%}" if regime == "encoder" else "reported, no target"
        rows.append(
            BenchRow(
                f"upload per source, {regime} regime (floats)",
                float(np.mean(sk_f)),
                float(np.mean(par_f)),
                "parameters uploaded (FedAvg)",
                "floats",
                "lower",
                f"sketch/parameters per source {min(ratios):.1%}-{max(ratios):.1%} ({target}); "
                f"sketch floats {min(sk_f)}-{max(sk_f)}, parameters {min(par_f)}-{max(par_f)}; "
                f"counted from the formula |O_s| C (d+2) + |O_s|(|O_s|-1) C and the live model",
            )
        )
    return rows
