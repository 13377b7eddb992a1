"""Gated CoFrGeNet: non-expanding gated continued-fraction channel mixing for LMs, divisions via log/exp.

    from neurips26.cofrgenet import GatedCF, Cffn, swap_ffn, cf_signed, DyadicSchedule

The HF-dependent helpers (``swap_ffn``, ``build_model``, ...) need ``transformers``; when it is installed,
importing this package registers the model type "cofrgenet" with its Auto classes, so a saved swapped
model reloads through a plain ``AutoModelForCausalLM.from_pretrained(path)``.
"""

import importlib.util

from neurips26.cofrgenet.continued_fraction import (
    DIVISIONS,
    bounded_reciprocal,
    cf_exact,
    cf_nested,
    cf_positive,
    cf_signed,
    continuants,
    fused_positive_gate,
    prop1_gradient,
)
from neurips26.cofrgenet.layers import (
    CFExperts,
    Cffn,
    DyadicSchedule,
    GatedCF,
    GatedCFExperts,
    GeluMLP,
    SwiGLU,
    count_params,
    matched_width,
)
# the training loop lives in ``training`` (not ``train``), so ``neurips26.cofrgenet.train`` is always the
# function: no submodule of that name can shadow it (issue 29, item 4)
from neurips26.cofrgenet.training import TrainConfig, param_groups, train

GatedCoFrFFN = GatedCF  # the name DESIGN.md uses

if importlib.util.find_spec("transformers") is not None:
    # model_type "cofrgenet" -> AutoConfig / AutoModelForCausalLM: a saved swapped model reloads through a
    # plain AutoModelForCausalLM.from_pretrained(path), no trust_remote_code (issue 29)
    from neurips26.cofrgenet.hf import register_auto as _register_auto

    _register_auto()

_LAZY = {
    "swap_ffn": "hf", "add_mamba2_ffn": "hf", "Mamba2WithFFN": "hf", "build_model": "hf", "tiny_config": "hf",
    "ffn_factory": "hf", "FAMILIES": "hf", "find_ffns": "hf", "save_pretrained": "hf", "from_pretrained": "hf",
    "swap_record": "hf",
    "load_corpus": "data", "fetch_corpus": "data", "Corpus": "data", "CorpusUnavailableError": "data",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"neurips26.cofrgenet.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'neurips26.cofrgenet' has no attribute {name!r}")


__all__ = ["DIVISIONS", "bounded_reciprocal", "cf_exact", "cf_nested", "cf_positive", "cf_signed",
           "continuants", "prop1_gradient", "fused_positive_gate", "CFExperts", "Cffn", "DyadicSchedule",
           "GatedCF", "GatedCFExperts", "GatedCoFrFFN", "GeluMLP", "SwiGLU", "count_params", "matched_width",
           "swap_ffn", "find_ffns", "save_pretrained", "from_pretrained", "swap_record", "add_mamba2_ffn",
           "Mamba2WithFFN", "build_model", "tiny_config", "ffn_factory", "FAMILIES", "TrainConfig", "train",
           "param_groups", "load_corpus", "fetch_corpus", "Corpus", "CorpusUnavailableError"]
