"""Issue 29: GatedCF as a drop-in users can ship.

Persistence (swap recorded in config, save/from_pretrained bit-identical for GPT-2, Llama, Mixtral,
Qwen2-MoE, a Mamba-2 hybrid; remote code through AutoModelForCausalLM), swap_ffn by structure on more
families (Qwen2, Mistral, Gemma, OLMo2, Qwen3-MoE), dtype/device kept, ``layers=``, warm start, errors
naming the module path, and the package name ``train`` being the function.
"""

import json
import math
import subprocess
import sys

import pytest
import torch

transformers = pytest.importorskip("transformers")

from neurips26.cofrgenet import CFExperts, Cffn, GatedCF, GatedCFExperts, SwiGLU  # noqa: E402
from neurips26.cofrgenet.hf import (add_mamba2_ffn, find_ffns, from_pretrained, native_ffn_classes,  # noqa: E402
                                    save_pretrained, swap_ffn, swap_record)

transformers.logging.set_verbosity_error()
V = 64
COMMON = dict(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
              intermediate_size=48)


def _cfg(name):
    t = transformers
    return {
        "gpt2": lambda: t.GPT2Config(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=32),
        "llama": lambda: t.LlamaConfig(**COMMON),
        "mixtral": lambda: t.MixtralConfig(**COMMON, num_local_experts=4, num_experts_per_tok=2),
        "qwen2_moe": lambda: t.Qwen2MoeConfig(**COMMON, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24,
                                              shared_expert_intermediate_size=40),
        "qwen2": lambda: t.Qwen2Config(**COMMON),
        "mistral": lambda: t.MistralConfig(**COMMON),
        "gemma": lambda: t.GemmaConfig(**COMMON, head_dim=8),
        "olmo2": lambda: t.Olmo2Config(**COMMON),
        "qwen3_moe": lambda: t.Qwen3MoeConfig(**COMMON, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=24),
    }[name]()


def _model(name):
    torch.manual_seed(0)
    if name == "mamba2":
        m = transformers.Mamba2ForCausalLM(transformers.Mamba2Config(
            vocab_size=V, hidden_size=32, num_hidden_layers=2, num_heads=4, head_dim=16, expand=2, state_size=16,
            n_groups=1, chunk_size=16))
        return add_mamba2_ffn(m)
    return transformers.AutoModelForCausalLM.from_config(_cfg(name))


def _logits(model, ids):
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids).logits


def _perturb(model):
    """Move every parameter off its init so a reload that re-initialises anything shows."""
    with torch.no_grad():
        for t in model.parameters():
            t.add_(0.01 * torch.randn_like(t))


# ---------------------------------------------------------------- item 1: persistence

@pytest.mark.parametrize("name, layer", [
    ("gpt2", "gatedcf"), ("llama", "gatedcf"), ("mixtral", "gatedcf"), ("mixtral", "cffn"), ("qwen2_moe", "gatedcf"),
    ("mamba2", "gatedcf")])
def test_round_trip_is_bit_identical(name, layer, tmp_path):
    model = _model(name)
    factory = (lambda p: GatedCF(p, n_layers=2)) if layer == "gatedcf" else (lambda p: Cffn(p, depth=4))
    swap_ffn(model, factory)
    _perturb(model)
    ids = torch.randint(0, V, (2, 12), generator=torch.Generator().manual_seed(1))
    ref = _logits(model, ids)
    save_pretrained(model, tmp_path)
    cfg = transformers.AutoConfig.from_pretrained(tmp_path)
    assert cfg.cofrgenet["ops"], "swap not recorded in config.json"
    reloaded = from_pretrained(tmp_path)
    assert torch.equal(_logits(reloaded, ids), ref)
    remote = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, trust_remote_code=True)
    assert torch.equal(_logits(remote, ids), ref)
    # no remote code: model_type "cofrgenet" is registered by importing neurips26.cofrgenet
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "cofrgenet"
    plain = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert torch.equal(_logits(plain, ids), ref)
    assert not [n for n, m in plain.named_modules() if isinstance(m, native_ffn_classes())]
    assert not [n for n, m in reloaded.named_modules() if isinstance(m, native_ffn_classes())]
    if name == "mixtral":   # keys in the transformers-5 legacy layout were found and loaded, not dropped
        assert isinstance(reloaded.model.layers[0].mlp.experts, GatedCFExperts if layer == "gatedcf" else CFExperts)


def test_plain_save_pretrained_and_fresh_process_auto_load(tmp_path):
    """model.save_pretrained (HF's own) after a swap, then AutoModelForCausalLM.from_pretrained(path) with no
    trust_remote_code in a fresh interpreter whose only extra step is `import neurips26.cofrgenet`."""
    for name in ("llama", "mixtral"):
        model = _model(name)
        swap_ffn(model, lambda p: GatedCF(p, n_layers=2))
        _perturb(model)
        assert isinstance(model, getattr(transformers, type(model).__name__))   # still the HF class
        d = tmp_path / name
        model.save_pretrained(d)
        ids = torch.randint(0, V, (2, 12), generator=torch.Generator().manual_seed(1))
        torch.save({"ids": ids, "ref": _logits(model, ids)}, d / "ref.pt")
    script = (
        "import sys, torch, transformers\n"
        "import neurips26.cofrgenet\n"
        "for d in sys.argv[1:]:\n"
        "    r = torch.load(d + '/ref.pt')\n"
        "    m = transformers.AutoModelForCausalLM.from_pretrained(d).eval()\n"
        "    with torch.no_grad():\n"
        "        out = m(input_ids=r['ids']).logits\n"
        "    print(type(m).__name__, type(m.config).__name__, bool(torch.equal(out, r['ref'])))\n")
    res = subprocess.run([sys.executable, "-c", script, str(tmp_path / "llama"), str(tmp_path / "mixtral")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["LlamaForCausalLM", "CofrgenetLlamaConfig", "True",
                                  "MixtralForCausalLM", "CofrgenetMixtralConfig", "True"], res.stdout


def test_unswapped_models_keep_their_type(tmp_path):
    """Registration touches only model_type "cofrgenet": a native model still saves/loads as itself."""
    model = _model("llama")
    model.save_pretrained(tmp_path)
    again = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    assert type(again) is transformers.LlamaForCausalLM and again.config.model_type == "llama"
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({"model_type": "cofrgenet"}))
    with pytest.raises(ValueError, match="base_model_type"):
        transformers.AutoConfig.from_pretrained(bad)


def test_swap_record_names_paths_and_layer_config():
    model = _model("llama")
    swap_ffn(model, lambda p: GatedCF(p, ladders=3, depth=5, n_layers=2), layers=[1])
    ops = swap_record(model)["ops"]
    assert [o["path"] for o in ops] == ["model.layers.1.mlp"]
    assert ops[0]["layer"]["class"] == "GatedCF"
    assert ops[0]["layer"]["kwargs"]["ladders"] == 3 and ops[0]["layer"]["kwargs"]["depth"] == 5
    assert type(model.model.layers[0].mlp).__name__ == "LlamaMLP"      # layer 0 untouched


def test_bf16_model_round_trip(tmp_path):
    model = _model("llama").to(torch.bfloat16)
    swap_ffn(model, lambda p: GatedCF(p))
    ids = torch.randint(0, V, (1, 8))
    ref = _logits(model, ids)
    save_pretrained(model, tmp_path)
    reloaded = from_pretrained(tmp_path, dtype=torch.bfloat16)
    assert reloaded.model.layers[0].mlp.W_u.weight.dtype == torch.bfloat16
    # HF itself keeps the rotary inv_freq buffer fp32 on a bf16 load while .to(bf16) casts it (a native
    # LlamaForCausalLM round trip differs the same way); align that buffer, then every weight is exact
    rot = reloaded.model.rotary_emb
    rot.inv_freq = rot.inv_freq.to(torch.bfloat16)
    assert torch.equal(_logits(reloaded, ids), ref)


def test_save_refuses_unrecordable_swap(tmp_path):
    model = _model("llama")
    swap_ffn(model, lambda p: torch.nn.Sequential(torch.nn.Linear(p, p)))
    with pytest.raises(ValueError, match="model.layers.0.mlp.*LAYER_CLASSES"):
        save_pretrained(model, tmp_path)
    with pytest.raises(ValueError, match="no cofrgenet swap record"):
        save_pretrained(_model("llama"), tmp_path)


# ---------------------------------------------------------------- item 2: swap by structure

@pytest.mark.parametrize("name", ["qwen2", "mistral", "gemma", "olmo2", "qwen3_moe"])
def test_more_families_swap_by_structure(name):
    model = _model(name)
    ids = torch.randint(0, V, (2, 10))
    swap_ffn(model, lambda p: GatedCF(p, n_layers=2))
    natives = [n for n, m in model.named_modules() if type(m).__name__.endswith(("MLP", "Experts"))
               and not isinstance(m, GatedCFExperts)]
    assert natives == [], natives
    found = find_ffns(model)
    assert len(found) == 2 and all(isinstance(model.get_submodule(p), (GatedCF, GatedCFExperts)) for p, *_ in found)
    out = model(input_ids=ids, labels=ids)
    assert torch.isfinite(out.loss) and abs(out.loss.item() - math.log(V)) < 1.0
    out.loss.backward()


def test_swap_keeps_dtype_and_device():
    model = _model("llama").to(torch.bfloat16)
    swap_ffn(model, lambda p: GatedCF(p))
    assert all(t.dtype == torch.bfloat16 for t in model.parameters())
    ids = torch.randint(0, V, (1, 8))
    assert torch.isfinite(model(input_ids=ids).logits.float()).all()
    moe = _model("mixtral").to(torch.float64)
    swap_ffn(moe, lambda p: GatedCF(p))
    assert moe.model.layers[0].mlp.experts.W_u.dtype == torch.float64


def test_layers_subset_and_bad_layers():
    model = _model("mixtral")
    swap_ffn(model, lambda p: GatedCF(p), layers=[0])
    assert isinstance(model.model.layers[0].mlp.experts, GatedCFExperts)
    assert type(model.model.layers[1].mlp.experts).__name__ == "MixtralExperts"
    with pytest.raises(ValueError, match=r"no FFN in layer\(s\) \[7\]"):
        swap_ffn(_model("llama"), lambda p: GatedCF(p), layers=[7])
    with pytest.raises(TypeError, match="layers"):
        swap_ffn(_model("llama"), lambda p: GatedCF(p), layers=1)


def test_warm_start_fits_old_mlp_outputs():
    model = _model("llama")
    ids = torch.randint(0, V, (4, 16), generator=torch.Generator().manual_seed(0))
    swap_ffn(model, lambda p: GatedCF(p), warm_start=ids, warm_steps=60, warm_lr=1e-2)
    fit = model.cofrgenet_fit_error
    assert set(fit) == {"model.layers.0.mlp", "model.layers.1.mlp"}
    for v in fit.values():   # a real fit: the error drops well below the untrained layer's
        assert v["rel_mse_fit"] < 0.5 * v["rel_mse_init"], v
    moe = _model("mixtral")   # experts are fitted through the dispatch contract (router inputs recorded)
    swap_ffn(moe, lambda p: GatedCF(p), warm_start=ids, warm_steps=30)
    assert all(v["rel_mse_fit"] < v["rel_mse_init"] for v in moe.cofrgenet_fit_error.values())
    with pytest.raises(TypeError, match="warm_start"):
        swap_ffn(_model("llama"), lambda p: GatedCF(p), warm_start=[1, 2])


class _OddMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = torch.nn.Linear(32, 64)
        self.outp = torch.nn.Linear(64, 32)

    def forward(self, x):
        return self.outp(self.inp(x))


def test_unknown_layout_error_names_module_path():
    model = _model("llama")
    model.model.layers[1].mlp = _OddMLP()
    with pytest.raises(ValueError, match=r"'model.layers.1.mlp' \(_OddMLP; children: inp \(Linear\)"):
        swap_ffn(model, lambda p: GatedCF(p))
    with pytest.raises(ValueError, match="add_mamba2_ffn"):
        swap_ffn(transformers.Mamba2ForCausalLM(transformers.Mamba2Config(
            vocab_size=V, hidden_size=32, num_hidden_layers=1, num_heads=4, head_dim=16, expand=2)),
            lambda p: GatedCF(p))


def test_reswap_of_our_own_layers():
    model = _model("llama")
    swap_ffn(model, lambda p: GatedCF(p))
    swap_ffn(model, lambda p: SwiGLU(p, 40))
    assert isinstance(model.model.layers[0].mlp, SwiGLU)
    assert [o["layer"]["class"] for o in swap_record(model)["ops"]] == ["SwiGLU", "SwiGLU"]


# ---------------------------------------------------------------- item 4: the name ``train``

def test_train_is_the_function_whatever_is_imported_first():
    """No submodule is called ``train`` (the loop lives in ``training``), so importing any submodule can
    never rebind the package attribute ``train`` to a module (the README example's TypeError)."""
    import importlib
    import importlib.util

    import neurips26.cofrgenet as pkg

    importlib.import_module("neurips26.cofrgenet.training")
    assert importlib.util.find_spec("neurips26.cofrgenet.train") is None
    from neurips26.cofrgenet import TrainConfig, train
    assert callable(train) and train.__name__ == "train" and pkg.train is train
    assert TrainConfig is importlib.import_module("neurips26.cofrgenet.training").TrainConfig
