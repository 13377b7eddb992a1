"""NoTA: normalized MPO-tensor adapters for rehearsal-free class-incremental learning.

    from neurips26.nota import AdaptedLinear
    layer = AdaptedLinear(torch.nn.Linear(64, 64), kind="mpo", rule="global", bond=4); layer.new_task()
    y = layer(torch.randn(8, 64))      # W0 x + gamma S/sqrt(||S||^2+eps^2) x, S = sum of task MPO updates
"""
from neurips26.nota.accumulation import (RULES, accumulate, bound_global, bound_plain, bound_taskwise, drifts,
                                         global_drift_exact, global_normalize)
from neurips26.nota.adapters import AdaptedLinear, LoRAAdapter, MPOAdapter, attach_adapters
from neurips26.nota.backbone import HybridViT, PretrainConfig, pretrain
from neurips26.nota.cil import (METHODS, CILModel, FrozenBackboneCIL, TrainSettings, check_tasks, cil_metrics,
                                load_adapters, predict, run_cil, run_frozen_cil, run_ncm, save_adapters,
                                task_split, train_task)
from neurips26.nota.coda import CODAPrompt, run_coda
from neurips26.nota.data import CHARSET, check_images, digits, synth_glyphs
from neurips26.nota.ease import EASE, run_ease
from neurips26.nota.l2p import L2P, run_l2p
from neurips26.nota.mpo import apply, balanced_factors, bond_dims, contract, n_params, tt_svd
from neurips26.nota.prompt_pool import PromptPool
from neurips26.nota.sweep import SweepSpace, make_trials, run_sweep, run_trial

__all__ = ["RULES", "accumulate", "bound_global", "bound_plain", "bound_taskwise", "drifts",
           "global_drift_exact",
           "global_normalize", "AdaptedLinear", "LoRAAdapter", "MPOAdapter", "attach_adapters", "HybridViT",
           "PretrainConfig", "pretrain", "METHODS", "CILModel", "TrainSettings", "check_tasks", "cil_metrics",
           "load_adapters", "predict", "run_cil", "run_ncm", "save_adapters", "train_task", "CHARSET",
           "check_images", "digits", "synth_glyphs", "apply", "bond_dims", "contract", "n_params", "tt_svd",
           "CODAPrompt", "run_coda", "EASE", "run_ease", "balanced_factors", "FrozenBackboneCIL", "run_frozen_cil",
           "task_split", "L2P", "run_l2p", "PromptPool", "SweepSpace", "make_trials", "run_sweep", "run_trial"]
