"""Njord: probabilistic latent-variable GNN ensembles for ocean forecasting on K-means meshes.

from neurips26.njord import make_mask, kmeans_mesh
mesh = kmeans_mesh(make_mask(24, seed=0), r1=8.0, r=4.0, levels=2)
print(mesh.sizes, mesh.info["land_nodes"])
"""

from neurips26.njord.baselines import Climatology, RidgeIncrement, persistence
from neurips26.njord.data import (
    Dataset,
    Normaliser,
    build_dataset,
    forcing,
    from_xarray,
    pseudo_observations,
    static_features,
    to_grid,
    to_nodes,
    to_xarray,
    to_zarr,
)
from neurips26.njord.layers import InteractionNet, PropagationNet, scatter_mean, scatter_sum
from neurips26.njord.mesh import Mesh, build_mesh, kmeans_mesh, rectangular_mesh, spherical_kmeans_mesh
from neurips26.njord.metrics import (
    crps_fair,
    crps_sorted,
    crps_standard,
    rank_histogram,
    rmse_ensmean,
    spread,
    ssr,
)
from neurips26.njord.models import DeterministicTwin, Njord, kl_diag_gaussians
from neurips26.njord.simulator import (
    DataConfig,
    OceanConfig,
    ShallowWater,
    generate,
    make_mask,
    oracle_ensemble,
)
from neurips26.njord.training import TrainConfig, train

__all__ = [
    "Climatology",
    "RidgeIncrement",
    "persistence",
    "Dataset",
    "Normaliser",
    "build_dataset",
    "forcing",
    "from_xarray",
    "pseudo_observations",
    "static_features",
    "to_grid",
    "to_nodes",
    "to_xarray",
    "to_zarr",
    "InteractionNet",
    "PropagationNet",
    "scatter_mean",
    "scatter_sum",
    "Mesh",
    "build_mesh",
    "kmeans_mesh",
    "rectangular_mesh",
    "spherical_kmeans_mesh",
    "crps_fair",
    "crps_sorted",
    "crps_standard",
    "rank_histogram",
    "rmse_ensmean",
    "spread",
    "ssr",
    "DeterministicTwin",
    "Njord",
    "kl_diag_gaussians",
    "DataConfig",
    "OceanConfig",
    "ShallowWater",
    "generate",
    "make_mask",
    "oracle_ensemble",
    "TrainConfig",
    "train",
]
