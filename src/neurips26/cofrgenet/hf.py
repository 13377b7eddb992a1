"""Swapping the feed-forward layers of Hugging Face ``transformers`` models (spec M5).

Families (random init from configs, nothing downloaded):

* ``gpt2``    ``GPT2LMHeadModel.transformer.h[i].mlp``        (GPT2MLP, GELU 4x)
* ``llama``   ``LlamaForCausalLM.model.layers[i].mlp``        (LlamaMLP, SwiGLU)
* ``mixtral`` ``MixtralForCausalLM.model.layers[i].mlp.experts`` (every expert; router untouched);
              also Qwen2-MoE / OLMoE (same ``mlp.experts`` layout; Qwen2-MoE ``shared_expert`` too)
* ``mamba2``  ``Mamba2ForCausalLM.backbone.layers[i]`` wrapped by :class:`Mamba2WithFFN`
              (ASSUMPTION: Mamba-2 block followed by an FFN, as mamba_ssm's MixerModel with d_intermediate > 0)
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor, nn

from neurips26.cofrgenet.layers import CFExperts, Cffn, GatedCF, GatedCFExperts, GeluMLP, SwiGLU
from neurips26.harness.validation import check_choice, check_scalar

FAMILIES = ("gpt2", "llama", "mixtral", "mamba2")
FFN_KINDS = ("native", "swiglu", "gelu", "cffn", "gatedcf")

Factory = Callable[[int], nn.Module]


def check_family(family: object) -> str:
    return str(check_choice(family, "family", FAMILIES))


# ----------------------------------------------------------------------------- Mamba-2 + FFN

class Mamba2WithFFN(nn.Module):
    """A Mamba-2 block followed by a pre-norm FFN:  out = block(x, ...); out = out + ffn(RMSNorm(out)).

    Extra arguments (``cache``, ``attention_mask``, ...) pass through to the wrapped block.
    """

    def __init__(self, block: nn.Module, ffn: nn.Module, hidden_size: int, norm_eps: float = 1e-5):
        super().__init__()
        self.block = block
        self.norm = nn.RMSNorm(hidden_size, eps=norm_eps)
        self.ffn = ffn

    def forward(self, hidden_states: Tensor, *args: Any, **kwargs: Any) -> Tensor:
        out = self.block(hidden_states, *args, **kwargs)
        if isinstance(out, tuple):  # older transformers returned tuples
            return (out[0] + self.ffn(self.norm(out[0])),) + tuple(out[1:])
        return out + self.ffn(self.norm(out))


def mamba2_ffn_width(p: int) -> int:
    """mamba_ssm GatedMLP width: ceil(8p/3) rounded up to a multiple of 128."""
    return int(math.ceil(math.ceil(8 * p / 3) / 128) * 128)


def add_mamba2_ffn(model: nn.Module, factory: Factory | None = None) -> nn.Module:
    """Wrap every ``backbone.layers[i]`` of a Mamba-2 model as ``Mamba2WithFFN`` (default ffn: SwiGLU)."""
    layers = getattr(getattr(model, "backbone", None), "layers", None)
    if layers is None:
        raise ValueError("model must be a Hugging Face Mamba-2 model with backbone.layers")
    p = int(model.config.hidden_size)
    factory = factory or (lambda q: SwiGLU(q, mamba2_ffn_width(q)))
    eps = float(getattr(model.config, "layer_norm_epsilon", 1e-5))
    for i, blk in enumerate(layers):
        if isinstance(blk, Mamba2WithFFN):
            raise ValueError("model already has Mamba2WithFFN blocks; use swap_ffn to change the FFN")
    for i, blk in enumerate(layers):
        wrapped = Mamba2WithFFN(blk, factory(p), p, eps)
        layers[i] = _like(wrapped, blk)
        _record(model, {"op": "mamba2_ffn", "path": f"backbone.layers.{i}", "norm_eps": eps, "p": p,
                        "layer": layer_spec(wrapped.ffn)})
    return model


# ----------------------------------------------------------------------------- finding FFNs by structure

# (gate, up, down) / (in, out) projection names that make a module a feed-forward layer
_GLU_NAMES = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))
_MLP_NAMES = (("c_fc", "c_proj"), ("fc_in", "fc_out"), ("fc1", "fc2"), ("dense_h_to_4h", "dense_4h_to_h"))
_FFN_LIKE = ("mlp", "ffn", "feed_forward", "feedforward", "block_sparse_moe", "moe", "experts", "shared_expert")
_OURS = (GatedCF, Cffn, SwiGLU, GeluMLP)
LAYOUTS = ("gate/up/down projections (Llama, Qwen2, Mistral, Gemma, OLMo2, Qwen2-MoE shared expert)",
           "w1/w3/w2 projections", "c_fc/c_proj (GPT-2), fc_in/fc_out, fc1/fc2, dense_h_to_4h/dense_4h_to_h MLPs",
           "fused expert containers with 3-D gate_up_proj [E, 2I, p] and down_proj [E, p, I] (Mixtral, "
           "Qwen2-MoE, Qwen3-MoE, OLMoE)", "cofrgenet layers (GatedCF, Cffn, SwiGLU, GeluMLP, CFExperts, "
           "GatedCFExperts)")


def _out_features(mod: nn.Module) -> int | None:
    if isinstance(mod, nn.Linear):
        return int(mod.out_features)
    if type(mod).__name__ == "Conv1D":                 # HF GPT-2 Conv1D: weight [in, out]
        return int(mod.weight.shape[1])
    return None


def _pure(mod: nn.Module, names: tuple[str, ...]) -> bool:
    """Every child of ``mod`` that holds parameters is one of ``names`` (so a decoder layer with its
    attention is never taken for an FFN)."""
    return all(n in names for n, c in mod.named_children() if any(True for _ in c.parameters()))


def ffn_layout(mod: nn.Module, hidden_size: int | None = None) -> tuple[str, int, int] | None:
    """(kind, p, num_experts) when ``mod`` is a feed-forward layer by its structure, else None.

    kind: 'ffn' (a dense FFN: replaced by ``factory(p)``) or 'experts' (an expert container with the HF
    MixtralExperts forward contract: replaced by E experts of ``factory(p)``).
    """
    if isinstance(mod, (CFExperts, GatedCFExperts)):
        return "experts", mod.hidden_dim, mod.num_experts
    if isinstance(mod, _OURS):
        return "ffn", int(mod.p), 1
    params = dict(mod.named_parameters(recurse=False))
    gu, dn = params.get("gate_up_proj"), params.get("down_proj")
    if gu is not None and dn is not None and gu.dim() == 3 and dn.dim() == 3:
        p = hidden_size if hidden_size in (gu.shape[2], dn.shape[1]) else int(dn.shape[1])
        return "experts", int(p), int(gu.shape[0])
    children = dict(mod.named_children())
    for names in _GLU_NAMES + _MLP_NAMES:
        if all(n in children for n in names) and _pure(mod, names):
            p = _out_features(children[names[-1]])
            if p is not None:
                return "ffn", p, 1
    return None


def _layer_index(path: str) -> int | None:
    """The decoder-layer index of a module path: its first integer component (``model.layers.3.mlp`` -> 3)."""
    for part in path.split("."):
        if part.isdigit():
            return int(part)
    return None


def find_ffns(model: nn.Module, layers: Any = None) -> list[tuple[str, str, int, int]]:
    """[(path, kind, p, num_experts)] of the feed-forward layers of ``model``, found by structure (see
    ``LAYOUTS``), outermost first; ``layers``: only these decoder-layer indices.

    Raises ValueError naming the module path when an FFN-like module (``mlp``, ``ffn``, ``experts``, ...)
    has an unknown layout, or when the model has no FFN at all.
    """
    hidden = getattr(getattr(model, "config", None), "hidden_size", None)
    found: list[tuple[str, str, int, int]] = []
    taken: list[str] = []
    unknown: list[str] = []
    for path, mod in model.named_modules():
        if any(path.startswith(t + ".") for t in taken):
            continue
        lay = ffn_layout(mod, hidden)
        if lay is not None:
            found.append((path, *lay))
            taken.append(path)
        elif path.rsplit(".", 1)[-1].lower() in _FFN_LIKE and not isinstance(mod, nn.ModuleList):
            unknown.append(path)
    # an FFN-like module is fine if an FFN was found inside it (an MoE block holding its experts)
    unknown = [u for u in unknown if not any(f[0].startswith(u + ".") for f in found)]
    if unknown:
        u = unknown[0]
        mod = model.get_submodule(u)
        kids = ", ".join(f"{n} ({type(c).__name__})" for n, c in mod.named_children()) or "none"
        raise ValueError(f"unknown FFN layout at module path {u!r} ({type(mod).__name__}; children: {kids}); "
                         f"recognised layouts: {'; '.join(LAYOUTS)}")
    if not found:
        if isinstance(getattr(model, "backbone", None), nn.Module) and \
                any(isinstance(getattr(b, "mixer", None), nn.Module) for b in getattr(model.backbone, "layers", [])):
            raise ValueError("model has no recognised FFN path: a Hugging Face Mamba-2 block has no FFN; "
                             "call add_mamba2_ffn(model) first (spec M5 ASSUMPTION)")
        raise ValueError(f"model has no recognised FFN path ({type(model).__name__}: no module with a known "
                         f"feed-forward layout); recognised layouts: {'; '.join(LAYOUTS)}")
    if layers is not None:
        idx = {int(check_scalar(i, "layers[i]", int, min=0)) for i in layers}
        present = {_layer_index(f[0]) for f in found}
        missing = sorted(idx - present)
        if missing:
            raise ValueError(f"layers must name decoder layers that have an FFN; no FFN in layer(s) {missing} "
                             f"(layers with one: {sorted(i for i in present if i is not None)})")
        found = [f for f in found if _layer_index(f[0]) in idx]
    return found


# ----------------------------------------------------------------------------- layer specs (persistence)

LAYER_CLASSES: dict[str, type] = {c.__name__: c for c in (GatedCF, Cffn, SwiGLU, GeluMLP)}


def layer_spec(mod: nn.Module) -> dict[str, Any] | None:
    """{"class", "kwargs"} that rebuild ``mod`` (None when it is not a registered cofrgenet layer)."""
    name = type(mod).__name__
    if LAYER_CLASSES.get(name) is type(mod) and hasattr(mod, "layer_config"):
        return {"class": name, "kwargs": mod.layer_config()}
    return None


def build_layer(spec: dict[str, Any]) -> nn.Module:
    cls = LAYER_CLASSES.get(spec.get("class"))
    if cls is None:
        raise ValueError(f"unknown layer class {spec.get('class')!r} in the saved swap record; "
                         f"known: {sorted(LAYER_CLASSES)} (register yours in hf.LAYER_CLASSES)")
    return cls(**spec["kwargs"])


def _set_module(model: nn.Module, path: str, new: nn.Module) -> None:
    parent, _, name = path.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, name, new)


def _record(model: nn.Module, op: dict[str, Any]) -> None:
    """Append ``op`` to ``model.config.cofrgenet['ops']`` (replayed in order by from_pretrained)."""
    cfg = getattr(model, "config", None)
    if cfg is None:
        return
    rec = dict(getattr(cfg, "cofrgenet", None) or {"version": 1, "ops": []})
    ops = [o for o in rec["ops"] if not (o["op"] == op["op"] and o["path"] == op["path"])]
    rec["ops"] = ops + [op]
    cfg.cofrgenet = rec
    adopt(model)


def _like(new: nn.Module, old: nn.Module) -> nn.Module:
    """``new`` on the device and in the floating dtype of ``old``'s parameters."""
    ref = next((t for t in old.parameters() if t.dtype.is_floating_point), None)
    return new if ref is None else new.to(device=ref.device, dtype=ref.dtype)


def _make_experts(n_exp: int, p: int, factory: Factory) -> nn.Module:
    """Batched GatedCFExperts when the factory builds a GLU GatedCF, else the generic CFExperts loop."""
    proto = factory(p)
    if isinstance(proto, GatedCF) and proto.form == "glu":
        kw = {k: v for k, v in proto.layer_config().items() if k != "p"}
        return GatedCFExperts(n_exp, p, **kw)
    return CFExperts(n_exp, p, factory)


def _experts_op(path: str, mod: nn.Module) -> dict[str, Any]:
    if isinstance(mod, GatedCFExperts):
        return {"op": "experts", "path": path, "num_experts": mod.num_experts, "p": mod.hidden_dim,
                "batched": True, "layer": {"class": "GatedCF", "kwargs": {"p": mod.hidden_dim, **mod.gated_kwargs}}}
    return {"op": "experts", "path": path, "num_experts": mod.num_experts, "p": mod.hidden_dim, "batched": False,
            "layer": layer_spec(mod.experts[0])}


# ----------------------------------------------------------------------------- swap

def swap_ffn(model: nn.Module, factory: Factory, family: str | None = None, layers: Any = None,
             warm_start: Any = None, warm_steps: int = 200, warm_lr: float = 1e-2) -> nn.Module:
    """Replace the feed-forward layers of any HF causal LM (in place) by ``factory(p)``; returns the model.

    FFNs are found by structure (``find_ffns``: gate/up/down or fc_in/fc_out-style projections, fused
    expert containers), not by a list of model types. A dense FFN becomes ``factory(p)``; an expert
    container becomes E experts of ``factory(p)`` with the HF MixtralExperts dispatch contract (batched
    ``GatedCFExperts`` for GatedCF, else ``CFExperts``), the router untouched; a Qwen2-MoE shared expert is
    a dense FFN and is replaced too. New modules take the device and dtype of the ones they replace.

    layers: decoder-layer indices to swap (default all). warm_start: sample inputs (a LongTensor of input
    ids, or a dict of model kwargs); the old FFNs' inputs and outputs on it are recorded and each new
    module is fitted to them by Adam (``warm_steps``, ``warm_lr``) on the mean squared error; the fit
    errors (relative MSE before/after) are in ``model.cofrgenet_fit_error`` by module path.
    family: accepted for backward compatibility and only validated (detection is by structure).
    Every swap is recorded in ``model.config.cofrgenet`` so ``save_pretrained``/``from_pretrained`` (this
    module's) rebuild it.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(factory):
        raise TypeError(f"factory must be callable (hidden_size -> nn.Module), got {type(factory).__name__}")
    if family is not None:
        check_family(family)
    if layers is not None and (isinstance(layers, (str, bytes)) or not hasattr(layers, "__iter__")):
        raise TypeError(f"layers must be an iterable of decoder-layer indices, got {type(layers).__name__}")
    check_scalar(warm_steps, "warm_steps", int, min=0)
    check_scalar(warm_lr, "warm_lr", float, min=0, inclusive="neither")
    targets = find_ffns(model, layers)
    captured = _capture(model, [t[0] for t in targets], warm_start) if warm_start is not None else {}
    fit: dict[str, dict[str, float]] = {}
    for path, kind, p, n_exp in targets:
        old = model.get_submodule(path)
        new = factory(p) if kind == "ffn" else _make_experts(n_exp, p, factory)
        if not isinstance(new, nn.Module):
            raise TypeError(f"factory must return an nn.Module, got {type(new).__name__} (at {path!r})")
        new = _like(new, old)
        _set_module(model, path, new)
        if kind == "ffn":
            _record(model, {"op": "ffn", "path": path, "layer": layer_spec(new)})
        else:
            _record(model, _experts_op(path, new))
        if path in captured:
            fit[path] = _fit(new, captured[path], warm_steps, warm_lr)
    if warm_start is not None:
        model.cofrgenet_fit_error = fit
    return model


def _capture(model: nn.Module, paths: list[str], warm_start: Any) -> dict[str, list[tuple]]:
    """Inputs (args, kwargs) and outputs of the modules at ``paths`` on one no-grad forward of the model."""
    store: dict[str, list[tuple]] = {p: [] for p in paths}
    hooks = []

    def hook_for(path: str):
        def hook(_mod, args, kwargs, out):
            det = lambda t: t.detach() if isinstance(t, Tensor) else t   # noqa: E731
            o = out[0] if isinstance(out, tuple) else out
            store[path].append((tuple(det(a) for a in args), {k: det(v) for k, v in kwargs.items()}, det(o)))
        return hook

    for path in paths:
        hooks.append(model.get_submodule(path).register_forward_hook(hook_for(path), with_kwargs=True))
    try:
        with torch.no_grad():
            if isinstance(warm_start, dict):
                model(**warm_start)
            elif isinstance(warm_start, Tensor) and not warm_start.dtype.is_floating_point:
                model(input_ids=warm_start)
            else:
                raise TypeError("warm_start must be a LongTensor of input ids or a dict of model kwargs, "
                                f"got {type(warm_start).__name__}")
    finally:
        for h in hooks:
            h.remove()
    return store


def _fit(new: nn.Module, samples: list[tuple], steps: int, lr: float) -> dict[str, float]:
    """Fit ``new`` to recorded (args, kwargs, output) by Adam on the MSE; relative MSE before and after."""

    def rel_mse() -> float:
        with torch.no_grad():
            num = sum(float(((new(*a, **k) - o) ** 2).sum()) for a, k, o in samples)
            den = sum(float((o ** 2).sum()) for _, _, o in samples)
        return num / max(den, 1e-30)

    before = rel_mse()
    opt = torch.optim.Adam([t for t in new.parameters() if t.requires_grad], lr=lr)
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = sum(((new(*a, **k) - o) ** 2).mean() for a, k, o in samples) / len(samples)
        loss.backward()
        opt.step()
    return {"rel_mse_init": before, "rel_mse_fit": rel_mse(), "steps": steps}


# ----------------------------------------------------------------------------- save / load

REMOTE_CODE_FILE = "modeling_cofrgenet.py"
_REMOTE_CODE = '''"""Remote code written by neurips26.cofrgenet.save_pretrained: {base} with the swaps recorded in
config.cofrgenet replayed at construction, so AutoModelForCausalLM.from_pretrained(path,
trust_remote_code=True) loads the swapped weights exactly. Needs the neurips26 package installed
(``import neurips26.cofrgenet`` alone makes the plain from_pretrained(path) work too)."""
import transformers
from neurips26.cofrgenet.hf import apply_swaps, cofrgenet_config_class, generic_config_class


class CofrgenetConfig(generic_config_class()):
    pass


class {base}(transformers.{base}):
    config_class = cofrgenet_config_class(transformers.{base}.config_class)

    def __init__(self, config, *args, **kwargs):
        super().__init__(config, *args, **kwargs)
        apply_swaps(self, getattr(config, "cofrgenet", None))
'''


def swap_record(model: nn.Module) -> dict[str, Any] | None:
    """The swaps recorded on ``model.config`` (``{"version": 1, "ops": [...]}``), or None."""
    return getattr(getattr(model, "config", None), "cofrgenet", None)


def apply_swaps(model: nn.Module, record: dict[str, Any] | None) -> nn.Module:
    """Replay a swap record on a freshly built base model: the same modules at the same paths (weights
    are whatever the constructors give; ``from_pretrained`` then loads the saved ones)."""
    if not record:
        return model
    for op in record["ops"]:
        kind, path = op["op"], op["path"]
        if kind == "mamba2_ffn":
            block = model.get_submodule(path)
            wrapped = Mamba2WithFFN(block, build_layer(op["layer"]), int(op["p"]), float(op["norm_eps"]))
            _set_module(model, path, _like(wrapped, block))
        elif kind == "ffn":
            _set_module(model, path, _like(build_layer(op["layer"]), model.get_submodule(path)))
        elif kind == "experts":
            spec, p, n = op["layer"], int(op["p"]), int(op["num_experts"])
            if op.get("batched"):
                new: nn.Module = GatedCFExperts(n, p, **{k: v for k, v in spec["kwargs"].items() if k != "p"})
            else:
                new = CFExperts(n, p, lambda _q: build_layer(spec))
            _set_module(model, path, _like(new, model.get_submodule(path)))
        else:
            raise ValueError(f"unknown op {kind!r} in the saved swap record (at {path!r})")
    return model


def _check_recordable(model: nn.Module) -> dict[str, Any]:
    record = swap_record(model)
    if not record:
        raise ValueError("model carries no cofrgenet swap record (config.cofrgenet); swap it with swap_ffn "
                         "or add_mamba2_ffn first, or save it with model.save_pretrained")
    for op in record["ops"]:
        if op.get("layer") is None:
            raise ValueError(f"the module swapped in at {op['path']!r} is not a registered cofrgenet layer, so "
                             f"from_pretrained cannot rebuild it; register its class (with a layer_config() "
                             f"method) in neurips26.cofrgenet.hf.LAYER_CLASSES before swapping")
    return record


def save_pretrained(model: nn.Module, path: Any, remote_code: bool = True, **kwargs: Any) -> None:
    """``model.save_pretrained(path)`` plus what reloading the swap needs: the swap record in config.json
    (``cofrgenet``) and, with ``remote_code``, ``modeling_cofrgenet.py`` + ``auto_map`` so that
    ``AutoModelForCausalLM.from_pretrained(path, trust_remote_code=True)`` rebuilds the swapped model.
    :func:`from_pretrained` here, and a plain ``AutoModelForCausalLM.from_pretrained(path)`` after
    ``import neurips26.cofrgenet`` (config.json's model_type is the registered "cofrgenet"), reload it
    without remote code."""
    from pathlib import Path

    _check_recordable(model)
    adopt(model)
    base = type(model).__name__
    import transformers

    if not hasattr(transformers, base):
        raise ValueError(f"model class {base} is not a transformers class; cannot write its remote code")
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    if remote_code:
        model.config.auto_map = {"AutoConfig": f"{REMOTE_CODE_FILE[:-3]}.CofrgenetConfig",
                                 "AutoModelForCausalLM": f"{REMOTE_CODE_FILE[:-3]}.{base}"}
    model.save_pretrained(out, **kwargs)
    if remote_code:
        (out / REMOTE_CODE_FILE).write_text(_REMOTE_CODE.format(base=base))


# ----------------------------------------------------------------------------- Auto* registration

MODEL_TYPE = "cofrgenet"        # config.json model_type of a swapped model; the base type is in the record
_SUBCLASSES: dict[type, type] = {}
_CONFIG_SUBCLASSES: dict[type, type] = {}
_GENERIC: list[type] = []


def cofrgenet_config_class(base: type) -> type:
    """The config class of a swapped ``base``-config model: a subclass of ``base`` (same fields) whose
    ``model_type`` is ``"cofrgenet"``, so config.json names a type that the Auto classes map here."""
    if getattr(base, "model_type", None) == MODEL_TYPE:
        return base
    if base not in _CONFIG_SUBCLASSES:
        _CONFIG_SUBCLASSES[base] = type(f"Cofrgenet{base.__name__}", (base,),
                                        {"model_type": MODEL_TYPE, "__module__": __name__})
    return _CONFIG_SUBCLASSES[base]


def swapped_class(base: type) -> type:
    """A subclass of the HF model class ``base`` (same name) that replays ``config.cofrgenet`` in __init__,
    registered with ``AutoModelForCausalLM`` for :func:`cofrgenet_config_class` of its config class."""
    if base not in _SUBCLASSES:
        import transformers

        def __init__(self, config, *args, **kwargs):
            base.__init__(self, config, *args, **kwargs)
            apply_swaps(self, getattr(config, "cofrgenet", None))
        cfg_cls = cofrgenet_config_class(base.config_class)
        cls = type(base.__name__, (base,), {"__init__": __init__, "__module__": __name__, "config_class": cfg_cls})
        _SUBCLASSES[base] = cls
        transformers.AutoModelForCausalLM.register(cfg_cls, cls, exist_ok=True)
    return _SUBCLASSES[base]


def generic_config_class() -> type:
    """``CofrgenetConfig`` (model_type "cofrgenet"), registered with ``AutoConfig``: ``from_dict`` reads the
    base model type from the swap record and returns that family's :func:`cofrgenet_config_class`."""
    if not _GENERIC:
        import transformers
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        def from_dict(cls, config_dict, **kwargs):
            base_type = (config_dict.get("cofrgenet") or {}).get("base_model_type")
            if base_type is None or base_type == MODEL_TYPE:
                raise ValueError("a 'cofrgenet' config needs cofrgenet.base_model_type (the swapped model's "
                                 "family, e.g. 'llama'); this config.json has none")
            base_cfg = CONFIG_MAPPING[base_type]
            model_cls = _base_model_class(config_dict, base_cfg)
            if model_cls is not None:
                swapped_class(model_cls)                       # registers the AutoModelForCausalLM mapping
            return cofrgenet_config_class(base_cfg).from_dict(config_dict, **kwargs)
        _GENERIC.append(type("CofrgenetConfig", (transformers.PretrainedConfig,),
                             {"model_type": MODEL_TYPE, "__module__": __name__,
                              "from_dict": classmethod(from_dict)}))
    return _GENERIC[0]


def _base_model_class(config_dict: dict[str, Any], base_cfg: type) -> type | None:
    import transformers

    arch = (config_dict.get("architectures") or [None])[0]
    cls = getattr(transformers, arch, None) if arch else None
    if cls is None:
        return None
    while cls.__module__ == __name__:      # a swapped subclass: register its transformers base
        cls = cls.__mro__[1]
    return cls


def register_auto() -> None:
    """Make ``AutoConfig`` / ``AutoModelForCausalLM.from_pretrained(path)`` (no remote code) load a saved
    swapped model: run on ``import neurips26.cofrgenet`` when transformers is installed."""
    import transformers

    transformers.AutoConfig.register(MODEL_TYPE, generic_config_class(), exist_ok=True)


def adopt(model: nn.Module) -> nn.Module:
    """Give a swapped transformers model its registered classes in place (config -> Cofrgenet<Config>,
    model -> the replaying subclass, both subclasses of the originals), so that any ``save_pretrained``
    writes model_type "cofrgenet" and a plain ``AutoModelForCausalLM.from_pretrained`` rebuilds the swap."""
    import transformers

    cfg = getattr(model, "config", None)
    if not isinstance(cfg, transformers.PretrainedConfig) or not isinstance(model, transformers.PreTrainedModel):
        return model
    base_model = type(model)
    while base_model.__module__ == __name__:
        base_model = base_model.__mro__[1]
    if getattr(transformers, base_model.__name__, None) is not base_model:
        return model                                          # not a public transformers class: leave it
    base_cfg = type(cfg)
    while base_cfg.__module__ == __name__:
        base_cfg = base_cfg.__mro__[1]
    rec = dict(cfg.cofrgenet)
    rec["base_model_type"] = base_cfg.model_type
    cfg.cofrgenet = rec
    register_auto()
    cfg.__class__ = cofrgenet_config_class(base_cfg)
    model.__class__ = swapped_class(base_model)
    return model


def from_pretrained(path: Any, **kwargs: Any) -> nn.Module:
    """Load a model saved by :func:`save_pretrained` (or by ``model.save_pretrained`` after a swap): the
    base HF class of ``config.architectures[0]``, the recorded swaps replayed, then the saved weights
    loaded by transformers' own ``from_pretrained`` (strict: a missing or unexpected key raises)."""
    import transformers

    register_auto()
    config = transformers.AutoConfig.from_pretrained(path)
    arch = (getattr(config, "architectures", None) or [None])[0]
    base = getattr(transformers, arch, None) if arch else None
    if base is None:
        raise ValueError(f"config.architectures of {path} names {arch!r}, not a transformers model class")
    cls = swapped_class(base)
    model, info = cls.from_pretrained(path, config=config, output_loading_info=True, **kwargs)
    bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if bad:
        raise ValueError(f"loading {path} did not match the recorded swap: {bad}")
    return adopt(model) if swap_record(model) else model


def native_ffn_classes() -> tuple[type, ...]:
    """Classes that count as a 'native FFN' for the no-native-FFN-left check."""
    from transformers.models.gpt2.modeling_gpt2 import GPT2MLP
    from transformers.models.llama.modeling_llama import LlamaMLP
    from transformers.models.mixtral.modeling_mixtral import MixtralExperts

    return (GPT2MLP, LlamaMLP, MixtralExperts, SwiGLU, GeluMLP)


# ----------------------------------------------------------------------------- building models

def tiny_config(family: str, vocab_size: int, hidden_size: int = 96, n_layers: int = 2, n_heads: int = 4,
                ctx: int = 64, n_experts: int = 4, top_k: int = 2) -> Any:
    """A small HF config of ``family`` (random init; no download)."""
    family = check_family(family)
    for name, v in (("vocab_size", vocab_size), ("hidden_size", hidden_size), ("n_layers", n_layers),
                    ("n_heads", n_heads), ("ctx", ctx), ("n_experts", n_experts), ("top_k", top_k)):
        check_scalar(v, name, int, min=1)
    if hidden_size % n_heads:
        raise ValueError(f"hidden_size ({hidden_size}) must be divisible by n_heads ({n_heads})")
    import transformers as tf

    if family == "gpt2":
        return tf.GPT2Config(vocab_size=vocab_size, n_embd=hidden_size, n_layer=n_layers, n_head=n_heads,
                             n_positions=ctx, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                             tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    if family == "llama":
        return tf.LlamaConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=n_layers,
                              num_attention_heads=n_heads, num_key_value_heads=n_heads,
                              intermediate_size=int(math.ceil(8 * hidden_size / 3)),
                              max_position_embeddings=ctx, tie_word_embeddings=False)
    if family == "mixtral":
        return tf.MixtralConfig(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=n_layers,
                                num_attention_heads=n_heads, num_key_value_heads=n_heads,
                                intermediate_size=int(math.ceil(8 * hidden_size / 3)),
                                num_local_experts=n_experts, num_experts_per_tok=min(top_k, n_experts),
                                max_position_embeddings=ctx, tie_word_embeddings=False,
                                router_jitter_noise=0.0, experts_implementation="eager")
    head_dim = 2 * hidden_size // n_heads           # num_heads * head_dim == expand * hidden_size
    return tf.Mamba2Config(vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=n_layers,
                           num_heads=n_heads, head_dim=head_dim, expand=2, state_size=16, n_groups=1,
                           chunk_size=min(64, ctx), tie_word_embeddings=False)


def build_model(family: str, config: Any) -> nn.Module:
    """The HF causal LM of ``family`` from ``config`` (Mamba-2 gets its SwiGLU FFNs added)."""
    family = check_family(family)
    import transformers as tf

    cls = {"gpt2": tf.GPT2LMHeadModel, "llama": tf.LlamaForCausalLM, "mixtral": tf.MixtralForCausalLM,
           "mamba2": tf.Mamba2ForCausalLM}[family]
    model = cls(config)
    if family == "mamba2":
        add_mamba2_ffn(model)
    return model


def ffn_factory(kind: str, n_layers: int = 1, **kwargs: Any) -> Factory | None:
    """A factory ``p -> nn.Module`` for FFN ``kind``; None for 'native' (keep the model's own).

    kind: 'native' | 'swiglu' (kwarg m) | 'gelu' (kwarg m) | 'cffn' (Cffn kwargs) | 'gatedcf' (GatedCF kwargs).
    """
    if kind not in FFN_KINDS:
        raise ValueError(f"kind must be one of {FFN_KINDS}, got {kind!r}")
    if kind == "native":
        return None
    if kind == "swiglu":
        return lambda p: SwiGLU(p, **kwargs)
    if kind == "gelu":
        return lambda p: GeluMLP(p, **kwargs)
    if kind == "cffn":
        return lambda p: Cffn(p, **kwargs)
    return lambda p: GatedCF(p, n_layers=n_layers, **kwargs)
