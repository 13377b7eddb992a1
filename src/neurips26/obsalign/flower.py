"""Scale-out with Flower (``flwr >= 1.42``, Message API): each source a ``ClientApp`` node, the server's
observability step in a ``ServerApp`` (spec "Scale-out"; optional extra ``neurips26[flower]``).

The round is ``federation.run_federation``'s, split where a real deployment splits it:

- client (one per source, its data never leaves it): load the broadcast parameters, E local epochs with
  the latest guidance (none in warm-up), build the sketch; reply with the parameters, the sketch and the
  public per-modality sample counts. Adam's moments and the batch-order generator live in the node's
  ``context.state``, so a node resumes where its last round stopped, as a long-lived source would.
- server (``ObsAlignServer.round``): pool the sketches, update omega (calibration, EMA), compute each
  source's reliability and guidance, and consolidate (FedAvg or evidence-aware weights, personal rows);
  send every source its consolidated parameters and guidance for the next round.

``run_simulation_obsalign`` runs it in Flower's simulation engine (Ray backend); with the same seed it
gives the in-process loop's omega and models (sketch noise off: there the in-process loop draws from one
generator shared by all sources, which separate nodes cannot). Deploy with ``flwr run`` using
``client_app`` / ``ObsAlignServer.server_app``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.obsalign.consolidation import consolidate
from neurips26.obsalign.federation import (METHODS, FedConfig, Method, modality_counts, server_step, shared_state,
                                           source_sketch, train_epochs)
from neurips26.obsalign.model import Guidance, ObsModel
from neurips26.obsalign.obsbench import ObsBench, validate_split
from neurips26.obsalign.observability import ObservabilityTracker
from neurips26.obsalign.sketch import Sketch

_SKETCH_FIELDS = ("counts", "proto", "disp", "pair_counts", "pair_cons")


def _flwr():
    try:
        from flwr import app, clientapp, serverapp
    except ImportError as e:   # pragma: no cover - depends on the optional extra
        raise ImportError("Flower is not installed: pip install 'neurips26[flower]' (flwr[simulation])") from e
    return app, clientapp, serverapp


def _method(method: Method | str) -> Method:
    m = METHODS[check_choice(method, "method", tuple(METHODS))] if isinstance(method, str) else method
    if m.consolidation == "none":
        raise ValueError(f"method {m.name!r} does not consolidate: nothing for a server to do")
    return m


# ---- what travels: parameters, guidance, sketches as arrays --------------------------------------------

def _guidance_arrays(g: Guidance | None) -> dict[str, np.ndarray]:
    if g is None:
        return {}
    out = {"g.mu": g.mu.numpy()}
    if g.align is not None:
        out["g.align"] = g.align.numpy()
    if g.transfer is not None:
        out["g.transfer"] = g.transfer.numpy()
    return out


def _guidance_from(arrays: dict[str, np.ndarray]) -> Guidance | None:
    if "g.mu" not in arrays:
        return None
    t = lambda k: torch.as_tensor(arrays[k]) if k in arrays else None
    return Guidance(t("g.mu"), t("g.align"), t("g.transfer"))


def _record(app, arrays: dict[str, np.ndarray]):
    return app.ArrayRecord(array_dict={k: app.Array(np.ascontiguousarray(v)) for k, v in arrays.items()})


def _arrays(record) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in record.items()}


# ---- the client ---------------------------------------------------------------------------------------

def _opt_state_arrays(opt: torch.optim.Optimizer) -> dict[str, np.ndarray]:
    out = {}
    for i, st in opt.state_dict()["state"].items():
        for name, val in st.items():
            out[f"{i}.{name}"] = torch.as_tensor(val).numpy()
    return out


def _load_opt_state(opt: torch.optim.Optimizer, arrays: dict[str, np.ndarray]) -> None:
    sd = opt.state_dict()
    state: dict[int, dict[str, torch.Tensor]] = {}
    for key, val in arrays.items():
        i, name = key.split(".", 1)
        state.setdefault(int(i), {})[name] = torch.as_tensor(val)
    sd["state"] = state
    opt.load_state_dict(sd)


def client_step(bench: ObsBench, pid: int, method: Method, cfg: FedConfig, seed: int,
                params: dict[str, np.ndarray], guidance: Guidance | None, guided: bool,
                state: dict[str, np.ndarray] | None) -> tuple[dict, Sketch, np.ndarray, dict]:
    """One source's part of a round (no Flower types): returns parameters, sketch, modality counts and the
    optimiser / generator state to keep for the next round."""
    src = bench.sources[pid]
    model = ObsModel(bench.dims, bench.n_classes, cfg.d, regime=cfg.regime)
    model.load_state_dict({k: torch.as_tensor(v) for k, v in params.items()})
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(seed * 1000 + pid)           # as run_federation's source ``pid``
    if state:
        _load_opt_state(opt, {k[4:]: v for k, v in state.items() if k.startswith("opt.")})
        gen.set_state(torch.as_tensor(state["gen"], dtype=torch.uint8))
    train_epochs(model, opt, src.train, src.spec.modalities, guidance if guided else None, cfg, gen,
                 method.prox_mu)
    sk = source_sketch(model, src.train, src.spec.modalities, guidance, cfg)
    keep = {f"opt.{k}": v for k, v in _opt_state_arrays(opt).items()}
    keep["gen"] = gen.get_state().numpy()
    return ({k: v.numpy() for k, v in shared_state(model).items()}, sk,
            modality_counts(src.train, src.spec.modalities), keep)


def client_app(bench: ObsBench, method: Method | str = "obsalign", cfg: FedConfig = FedConfig(),
               seed: int = 0):
    """A Flower ``ClientApp``: the node with ``node_config["partition-id"] = s`` is source ``s``."""
    app, clientapp, _ = _flwr()
    method = _method(method)
    for i, s in enumerate(bench.sources):
        validate_split(s.train, bench.dims, bench.n_classes, f"sources[{i}].train")
    capp = clientapp.ClientApp()

    @capp.train()
    def train(msg, context):
        pid = int(context.node_config["partition-id"])
        if not 0 <= pid < len(bench.sources):
            raise ValueError(f"partition-id {pid} outside the bench's {len(bench.sources)} sources")
        content = msg.content
        params = _arrays(content["params"])
        guid = _guidance_from(_arrays(content["guidance"])) if "guidance" in content else None
        guided = bool(content["config"]["guided"])
        state = _arrays(context.state["obsalign"]) if "obsalign" in context.state else None
        new, sk, counts, keep = client_step(bench, pid, method, cfg, seed, params, guid, guided, state)
        context.state["obsalign"] = _record(app, keep)
        sketch = {f"sk.{f}": getattr(sk, f) for f in _SKETCH_FIELDS}
        reply = app.RecordDict({
            "params": _record(app, new),
            "sketch": _record(app, {**sketch, "mod_counts": counts,
                                    "modalities": np.asarray(sk.modalities, dtype=np.int64)}),
            "metrics": app.MetricRecord({"partition-id": pid, "num-examples": len(bench.sources[pid].train)}),
        })
        return app.Message(reply, reply_to=msg)

    return capp


# ---- the server ---------------------------------------------------------------------------------------

@dataclass
class FlowerResult:
    omega: np.ndarray | None = None
    omega_history: list[np.ndarray] = field(default_factory=list)
    states: list[dict[str, torch.Tensor]] = field(default_factory=list)   # per source, after the last round
    global_state: dict[str, torch.Tensor] | None = None


class ObsAlignServer:
    """The server's side of the round: pooling, omega, guidance, consolidation (no Flower types in
    ``round``); ``server_app()`` wraps it in a Flower ``ServerApp`` driving ``n_sources`` nodes."""

    def __init__(self, dims: tuple[int, ...], n_classes: int, n_sources: int,
                 method: Method | str = "obsalign", cfg: FedConfig = FedConfig(), seed: int = 0,
                 timeout: float = 600.0):
        self.method, self.cfg = _method(method), cfg
        self.n_sources = check_scalar(n_sources, "n_sources", int, min=1)
        self.timeout = check_scalar(timeout, "timeout", float, min=0, inclusive="neither")
        seed = check_scalar(seed, "seed", int, min=0)
        torch.manual_seed(seed)
        init = ObsModel(dims, n_classes, cfg.d, regime=cfg.regime)      # run_federation's initial model
        self.C = n_classes
        self.guidance: list[Guidance | None] = [None] * n_sources
        self.tracker = ObservabilityTracker(self.method.omega, cfg.beta)
        self.result = FlowerResult(states=[shared_state(init) for _ in range(n_sources)])

    @property
    def params(self) -> list[dict[str, np.ndarray]]:
        """What each source is sent next: its consolidated parameters (the initial model before round 1)."""
        return [{k: v.numpy() for k, v in st.items()} for st in self.result.states]

    def round(self, sketches: list[Sketch], states: list[dict[str, np.ndarray]],
              mod_counts: np.ndarray, sizes: np.ndarray) -> None:
        """Sources' uploads (in source order) -> next round's parameters and guidance per source."""
        _, omega, self.guidance, w = server_step(self.method, self.cfg, self.tracker, sketches, mod_counts,
                                                 sizes, self.C)
        self.result.omega_history.append(omega.copy())
        self.result.omega = omega
        new, glob = consolidate([{k: torch.as_tensor(v) for k, v in s.items()} for s in states], w)
        self.result.states = new
        self.result.global_state = glob

    def server_app(self):
        app, _, serverapp = _flwr()
        sapp = serverapp.ServerApp()

        @sapp.main()
        def main(grid, context):
            t0 = time.monotonic()
            while len(list(grid.get_node_ids())) < self.n_sources:
                if time.monotonic() - t0 > self.timeout:
                    raise TimeoutError(f"only {len(list(grid.get_node_ids()))} of {self.n_sources} nodes "
                                       f"connected within {self.timeout} s")
                time.sleep(0.05)
            nodes = sorted(grid.get_node_ids())[: self.n_sources]
            source_of = dict(zip(nodes, range(self.n_sources)))   # round 1 sends everyone the same start;
            for r in range(1, self.cfg.rounds + 1):                # the replies then name each node's source
                guided = r > self.cfg.warmup
                msgs = []
                for node in nodes:
                    s = source_of[node]
                    content = {"params": _record(app, self.params[s]),
                               "config": app.ConfigRecord({"guided": guided, "round": r})}
                    if self.guidance[s] is not None:
                        content["guidance"] = _record(app, _guidance_arrays(self.guidance[s]))
                    msgs.append(app.Message(app.RecordDict(content), dst_node_id=node, message_type="train",
                                            group_id=str(r)))
                replies = list(grid.send_and_receive(msgs, timeout=self.timeout))
                bad = [m for m in replies if m.has_error()]
                if bad or len(replies) != self.n_sources:
                    why = "; ".join(str(m.error.reason) for m in bad) or f"{len(replies)} replies"
                    raise RuntimeError(f"round {r}: {why}")
                by_src = {}
                for m in replies:
                    pid = int(m.content["metrics"]["partition-id"])
                    source_of[m.metadata.src_node_id] = pid
                    by_src[pid] = m
                if sorted(by_src) != list(range(self.n_sources)):
                    raise RuntimeError(f"round {r}: replies from partitions {sorted(by_src)}")
                sketches, states, counts, sizes = [], [], [], []
                for s in range(self.n_sources):
                    c = by_src[s].content
                    a = _arrays(c["sketch"])
                    sketches.append(Sketch(tuple(int(x) for x in a["modalities"]),
                                           *(a[f"sk.{f}"] for f in _SKETCH_FIELDS)))
                    states.append(_arrays(c["params"]))
                    counts.append(a["mod_counts"])
                    sizes.append(float(c["metrics"]["num-examples"]))
                self.round(sketches, states, np.stack(counts), np.asarray(sizes))

        return sapp


def run_simulation_obsalign(bench: ObsBench, method: Method | str = "obsalign", cfg: FedConfig = FedConfig(),
                            seed: int = 0, num_cpus_per_client: float = 1.0) -> FlowerResult:
    """The federation in Flower's simulation engine, one virtual node per source; returns the server's
    omega history and the consolidated per-source models."""
    _flwr()
    from flwr.simulation import run_simulation

    method = _method(method)
    server = ObsAlignServer(bench.dims, bench.n_classes, len(bench.sources), method, cfg, seed)
    run_simulation(server.server_app(), client_app(bench, method, cfg, seed),
                   num_supernodes=len(bench.sources),
                   backend_config={"client_resources": {"num_cpus": num_cpus_per_client}})
    if len(server.result.omega_history) != cfg.rounds:
        raise RuntimeError(f"the simulation ran {len(server.result.omega_history)} of {cfg.rounds} rounds "
                           "(see Flower's log above)")
    return server.result
