"""The paper's one pinned evaluation harness (distinct from the project's ``neurips26.harness``).

from neurips26.gfm_audit.harness import Runner, Protocol, ModelEntry, digits_task, RCF
task = digits_task()
row = Runner().run(task, ModelEntry("rcf", lambda t, s: RCF(t.bands, seed=s)), Protocol("knn"), seed=0)

The grid as map_tasks tasks (picklable specs, one shard per task, merged by row key):

from neurips26.gfm_audit.harness import Cell, model_entry, run_cells, task_spec
cells = [Cell(task_spec("digits"), model_entry("rcf", features=64), Protocol("knn"), s) for s in (0, 1, 2)]
rows = run_cells(cells, "rows.jsonl", backend="process", workers=2).rows
"""

from neurips26.gfm_audit.harness.data import (
    SplitHashError,
    Task,
    digits_task,
    lfw_task,
    load_split,
    multispectral_task,
    random_split,
    save_split,
    spatial_split,
    split_hash,
    texture_task,
)
from neurips26.gfm_audit.harness.models import (
    RCF,
    FeatureModel,
    RawPCA,
    ResNet18,
    SmallEncoder,
    ViTTiny,
    build_model,
    pretrained_encoder,
    weights_sha256,
)
from neurips26.gfm_audit.harness.probes import (
    C_GRID,
    C_SUBGRID,
    LogisticProbe,
    bootstrap_accuracy_ci,
    iqm,
    iqm_ci,
    k_shot,
    knn_neighbors,
    knn_predict,
    label_fraction,
    sgd_probe,
    sweep,
)
from neurips26.gfm_audit.harness.protocol import Protocol
from neurips26.gfm_audit.harness.runner import ModelEntry, Runner, row_without_volatile
from neurips26.gfm_audit.harness.zoo import ModelSpec, model_entry, register_model
from neurips26.gfm_audit.harness.grid import Cell, GridResult, TaskSpec, rows_equal, run_cells, task_spec

__all__ = [
    "SplitHashError",
    "Task",
    "digits_task",
    "lfw_task",
    "load_split",
    "multispectral_task",
    "random_split",
    "save_split",
    "spatial_split",
    "split_hash",
    "texture_task",
    "RCF",
    "FeatureModel",
    "RawPCA",
    "ResNet18",
    "SmallEncoder",
    "ViTTiny",
    "build_model",
    "pretrained_encoder",
    "weights_sha256",
    "C_GRID",
    "C_SUBGRID",
    "LogisticProbe",
    "bootstrap_accuracy_ci",
    "iqm",
    "iqm_ci",
    "k_shot",
    "knn_neighbors",
    "knn_predict",
    "label_fraction",
    "sgd_probe",
    "sweep",
    "Protocol",
    "ModelEntry",
    "Runner",
    "row_without_volatile",
    "ModelSpec",
    "model_entry",
    "register_model",
    "Cell",
    "GridResult",
    "TaskSpec",
    "rows_equal",
    "run_cells",
    "task_spec",
]
