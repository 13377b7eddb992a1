"""Gated CoFrGeNet: non-expanding gated continued-fraction channel mixing for LMs, divisions via log/exp.

    from neurips26.cofrgenet import GatedCF, Cffn, swap_ffn, cf_signed, DyadicSchedule

The HF-dependent helpers (``swap_ffn``, ``build_model``, ...) import ``transformers`` only when used.
"""

from neurips26.cofrgenet.continued_fraction import (
    DIVISIONS,
    bounded_reciprocal,
    cf_exact,
    cf_nested,
    cf_positive,
    cf_signed,
    continuants,
    prop1_gradient,
)
from neurips26.cofrgenet.layers import (
    CFExperts,
    Cffn,
    DyadicSchedule,
    GatedCF,
    GeluMLP,
    SwiGLU,
    count_params,
    matched_width,
)
# eager, not lazy: the name ``train`` is also the submodule's, which an import of the submodule would
# otherwise bind on the package in place of the function
from neurips26.cofrgenet.train import TrainConfig, param_groups, train

GatedCoFrFFN = GatedCF  # the name DESIGN.md uses

_LAZY = {
    "swap_ffn": "hf", "add_mamba2_ffn": "hf", "Mamba2WithFFN": "hf", "build_model": "hf", "tiny_config": "hf",
    "ffn_factory": "hf", "FAMILIES": "hf",
    "load_corpus": "data", "fetch_corpus": "data", "Corpus": "data", "CorpusUnavailableError": "data",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"neurips26.cofrgenet.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'neurips26.cofrgenet' has no attribute {name!r}")


__all__ = ["DIVISIONS", "bounded_reciprocal", "cf_exact", "cf_nested", "cf_positive", "cf_signed", "continuants",
           "prop1_gradient", "CFExperts", "Cffn", "DyadicSchedule", "GatedCF", "GatedCoFrFFN", "GeluMLP",
           "SwiGLU", "count_params", "matched_width", "swap_ffn", "add_mamba2_ffn", "Mamba2WithFFN", "build_model",
           "tiny_config", "ffn_factory", "FAMILIES", "TrainConfig", "train", "param_groups", "load_corpus",
           "fetch_corpus", "Corpus", "CorpusUnavailableError"]
