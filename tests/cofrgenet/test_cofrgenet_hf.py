"""Check 8: swapped HF models (GPT-2, Llama, Mixtral, Mamba-2 + FFN) run fwd/bwd, init loss near ln(V),
no native FFN left; swap errors."""

import math

import pytest
import torch

transformers = pytest.importorskip("transformers")

from neurips26.cofrgenet import CFExperts, Cffn, GatedCF, GatedCFExperts, SwiGLU  # noqa: E402
from neurips26.cofrgenet.hf import (FAMILIES, Mamba2WithFFN, add_mamba2_ffn, build_model, ffn_factory,  # noqa: E402
                                    native_ffn_classes, swap_ffn, tiny_config)

transformers.logging.set_verbosity_error()
V = 84


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("kind", ["native", "cffn", "gatedcf", "gatedcf_signed"])
def test_swapped_model_runs_and_no_native_ffn_left(family, kind):
    torch.manual_seed(0)
    model = build_model(family, tiny_config(family, V, 32, 2, 4, 16))
    if kind != "native":
        kw = dict(denominators="signed", division="logexp") if kind == "gatedcf_signed" else {}
        swap_ffn(model, ffn_factory(kind.split("_")[0], n_layers=2, **kw))
    ids = torch.randint(0, V, (2, 16))
    out = model(input_ids=ids, labels=ids)
    assert torch.isfinite(out.loss)
    assert abs(out.loss.item() - math.log(V)) < 1.0
    out.loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    natives = [n for n, m in model.named_modules() if isinstance(m, native_ffn_classes())]
    cf = [m for m in model.modules() if isinstance(m, (Cffn, GatedCF))]
    cf += [m.expert(e) for m in model.modules() if isinstance(m, GatedCFExperts) for e in range(m.num_experts)]
    if kind == "native":
        assert natives
    else:
        assert natives == [], natives
        n_ffn = 2 * (model.config.num_local_experts if family == "mixtral" else 1)
        assert len(cf) == n_ffn
    if family == "mixtral":   # MoE block with its router stays
        for layer in model.model.layers:
            assert type(layer.mlp).__name__ == "MixtralSparseMoeBlock"
            assert type(layer.mlp.gate).__name__ == "MixtralTopKRouter"
            if kind != "native":
                assert isinstance(layer.mlp.experts, GatedCFExperts if kind.startswith("gatedcf") else CFExperts)


def test_swap_keeps_non_ffn_weights():
    torch.manual_seed(0)
    model = build_model("llama", tiny_config("llama", V, 32, 2, 4, 16))
    before = {k: v.clone() for k, v in model.state_dict().items() if ".mlp." not in k}
    swap_ffn(model, lambda p: GatedCF(p))
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_qwen2_moe_shared_expert_replaced():
    cfg = transformers.Qwen2MoeConfig(vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                                      num_key_value_heads=4, num_experts=3, num_experts_per_tok=2,
                                      moe_intermediate_size=16, shared_expert_intermediate_size=16,
                                      intermediate_size=64)
    model = transformers.Qwen2MoeForCausalLM(cfg)
    swap_ffn(model, lambda p: GatedCF(p))
    blk = model.model.layers[0].mlp
    assert isinstance(blk.experts, GatedCFExperts) and isinstance(blk.shared_expert, GatedCF)
    ids = torch.randint(0, V, (1, 8))
    model(input_ids=ids, labels=ids).loss.backward()


def test_mamba2_wrapper_passes_kwargs_and_is_residual():
    torch.manual_seed(0)
    model = build_model("mamba2", tiny_config("mamba2", V, 32, 1, 4, 16))
    blk = model.backbone.layers[0]
    assert isinstance(blk, Mamba2WithFFN) and isinstance(blk.ffn, SwiGLU)
    torch.nn.init.zeros_(blk.ffn.down_proj.weight)                 # ffn == 0 -> wrapper == block
    x = torch.randn(2, 8, 32)
    torch.testing.assert_close(blk(x, attention_mask=None), blk.block(x, attention_mask=None))


def test_swap_errors():
    with pytest.raises(ValueError, match="no recognised FFN"):
        swap_ffn(torch.nn.Linear(3, 3), lambda p: GatedCF(p))
    model = transformers.Mamba2ForCausalLM(tiny_config("mamba2", V, 32, 1, 4, 16))
    with pytest.raises(ValueError, match="no recognised FFN.*add_mamba2_ffn"):
        swap_ffn(model, lambda p: GatedCF(p))
    add_mamba2_ffn(model)
    with pytest.raises(ValueError, match="already has Mamba2WithFFN"):
        add_mamba2_ffn(model)
    llama = build_model("llama", tiny_config("llama", V, 32, 1, 4, 16))
    with pytest.raises(ValueError, match="family"):
        swap_ffn(llama, lambda p: GatedCF(p), family="t5")
    with pytest.raises(TypeError, match="factory"):
        swap_ffn(llama, "gatedcf")
    with pytest.raises(TypeError, match="model"):
        swap_ffn("llama", lambda p: GatedCF(p))
    with pytest.raises(ValueError, match="family"):
        tiny_config("bert", V)
    with pytest.raises(ValueError, match="vocab_size"):
        tiny_config("llama", 0)
    with pytest.raises(ValueError, match="kind"):
        ffn_factory("relu")
