"""The named models of the reproduction, as ``ModelEntry`` builders for a task.

``rcf`` (RCF / MOSAIKS), ``resnet18`` (random init), ``vit_tiny`` (random init), ``raw_pca``, ``simclr`` and
``mae`` (small encoders pretrained locally on the task's unlabeled pool with seed 0, pinned inputs; cached
and hashed, so the run's seed does not touch them).
"""

from __future__ import annotations

from neurips26.gfm_audit.harness.data import Task
from neurips26.gfm_audit.harness.models import RCF, RawPCA, ResNet18, ViTTiny, pretrained_encoder
from neurips26.gfm_audit.harness.protocol import Protocol
from neurips26.gfm_audit.harness.runner import ModelEntry, Runner
from neurips26.harness.validation import check_choice

MODEL_NAMES = ("rcf", "resnet18", "vit_tiny", "raw_pca", "simclr", "mae")


def _encoder(algorithm: str, steps: int):
    def build(task: Task, seed: int):
        pool = Runner.inputs(task, Protocol())[task.pool]
        return pretrained_encoder(pool, algorithm, steps=steps, seed=0, data_key=task.task_hash()[:16])

    return build


def harness_models(
    task: Task,
    names,
    rcf_features: int = 128,
    resnet_width: int = 64,
    simclr_steps: int = 150,
    mae_steps: int = 0,
) -> dict[str, ModelEntry]:
    """``ModelEntry`` per name (``mae`` only when ``mae_steps > 0``)."""
    out = {}
    for n in names:
        check_choice(n, "model", MODEL_NAMES)
    names = list(names) + (["mae"] if mae_steps > 0 and "mae" not in names else [])
    for n in names:
        if n == "rcf":
            out[n] = ModelEntry(
                n,
                lambda t, s, f=rcf_features: RCF(t.bands, features=f, seed=s),
                True,
                (("features", rcf_features),),
            )
        elif n == "resnet18":
            out[n] = ModelEntry(
                n,
                lambda t, s, w=resnet_width: ResNet18(t.bands, width=w, seed=s),
                True,
                (("width", resnet_width),),
            )
        elif n == "vit_tiny":
            out[n] = ModelEntry(
                n,
                lambda t, s: ViTTiny(
                    t.bands, t.x.shape[-1], patch=4 if t.x.shape[-1] % 4 == 0 else 1, seed=s
                ),
                True,
            )
        elif n == "raw_pca":
            out[n] = ModelEntry(n, lambda t, s: RawPCA(128), False, (("n_components", 128),))
        elif n == "simclr":
            out[n] = ModelEntry(n, _encoder("simclr", simclr_steps), False, (("steps", simclr_steps),))
        elif n == "mae" and mae_steps > 0:
            out[n] = ModelEntry(n, _encoder("mae", mae_steps), False, (("steps", mae_steps),))
    return out
