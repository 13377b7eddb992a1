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

from torch import Tensor, nn

from neurips26.cofrgenet.layers import CFExperts, Cffn, GatedCF, GeluMLP, SwiGLU
from neurips26.harness.validation import check_choice, check_scalar

FAMILIES = ("gpt2", "llama", "mixtral", "mamba2")
_MODEL_TYPE_TO_FAMILY = {"gpt2": "gpt2", "llama": "llama", "mixtral": "mixtral", "qwen2_moe": "mixtral",
                         "olmoe": "mixtral", "mamba2": "mamba2"}
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
        layers[i] = Mamba2WithFFN(blk, factory(p), p, eps)
    return model


# ----------------------------------------------------------------------------- swap

def _family_of(model: nn.Module) -> str:
    mt = getattr(getattr(model, "config", None), "model_type", None)
    if mt not in _MODEL_TYPE_TO_FAMILY:
        raise ValueError(f"model has no recognised FFN path (config.model_type={mt!r}); "
                         f"supported model types: {sorted(_MODEL_TYPE_TO_FAMILY)}")
    return _MODEL_TYPE_TO_FAMILY[mt]


def swap_ffn(model: nn.Module, factory: Factory, family: str | None = None) -> nn.Module:
    """Replace every feed-forward layer of ``model`` (in place) by ``factory(hidden_size)``; returns it.

    family: one of FAMILIES, or None to infer it from ``model.config.model_type``. For MoE models every
    expert becomes ``factory(p)`` inside a :class:`CFExperts` with the HF dispatch contract (router
    kept); a Qwen2-MoE ``shared_expert`` is replaced too. For Mamba-2 the model must first carry FFNs
    (:func:`add_mamba2_ffn`). New modules keep their own initialisation (the rest is untouched).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not callable(factory):
        raise TypeError(f"factory must be callable (hidden_size -> nn.Module), got {type(factory).__name__}")
    family = check_family(family) if family is not None else _family_of(model)
    p = int(getattr(model.config, "hidden_size", getattr(model.config, "n_embd", 0)))
    if family == "gpt2":
        blocks = getattr(getattr(model, "transformer", None), "h", None)
        if blocks is None or not all(hasattr(b, "mlp") for b in blocks):
            raise ValueError("model has no recognised FFN path: expected transformer.h[i].mlp (GPT-2)")
        for b in blocks:
            b.mlp = factory(p)
    elif family in ("llama", "mixtral"):
        layers = getattr(getattr(model, "model", None), "layers", None)
        if layers is None or not all(hasattr(b, "mlp") for b in layers):
            raise ValueError(f"model has no recognised FFN path: expected model.layers[i].mlp ({family})")
        for b in layers:
            if family == "llama":
                b.mlp = factory(p)
                continue
            moe = b.mlp
            experts = getattr(moe, "experts", None)
            if experts is None:
                raise ValueError("model has no recognised FFN path: expected model.layers[i].mlp.experts (MoE)")
            n_exp = int(getattr(experts, "num_experts", None) or getattr(model.config, "num_local_experts", None)
                        or model.config.num_experts)
            moe.experts = CFExperts(n_exp, p, factory)
            if hasattr(moe, "shared_expert"):
                moe.shared_expert = factory(p)
    else:  # mamba2
        layers = getattr(getattr(model, "backbone", None), "layers", None)
        if layers is None or not all(isinstance(b, Mamba2WithFFN) for b in layers):
            raise ValueError("model has no recognised FFN path: a Hugging Face Mamba-2 block has no FFN; "
                             "call add_mamba2_ffn(model) first (spec M5 ASSUMPTION)")
        for b in layers:
            b.ffn = factory(p)
    return model


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
