"""BIP: non-colliding virtual biometric identities allocated in the gaps of the real embedding manifold.

    from neurips26.bip import GapAllocator, Subspace, synthetic_gallery, impostor_scores, tau_far, margin
    R, _ = synthetic_gallery(2000); tau = tau_far(impostor_scores(R), 1e-4); _, tau_m = margin(tau)
    alloc = GapAllocator(R, tau, tau_m, Subspace(R), n_iter=10)
    V = alloc.allocate(1000); print(alloc.audit())
"""

from neurips26.bip.allocator import (Audit, BatchLog, GapAllocator, audit, enrollment_robustness,
                                     exact_energy, kernel, riemannian_step)
from neurips26.bip.baselines import (b1_uniform_sphere, b2_in_manifold, b3_rejection, b4_hyperface,
                                     b5_orthogonal)
from neurips26.bip.capacity import (cap_fraction, containment_fraction, ellipsoid_ratio,
                                    log10_ellipsoid_ratio, packing_bounds)
from neurips26.bip.encoder import (ArcFaceHead, Checkpoint, EncoderConfig, FREncoder, check_images, embed,
                                   identity_centers, load_checkpoint, train_encoder)
from neurips26.bip.gapgen import (GapGen, GapGenConfig, Generator, PatchCritic, frechet_distance,
                                  identity_consistency, image_collisions, slerp)
from neurips26.bip.gallery import (PCAReport, Subspace, VirtualIndex, as_unit, collisions, faiss_index,
                                   impostor_scores, knn, margin, maxcos, maxcos_faiss, pca_report,
                                   synthetic_gallery, tau_far, within_spread)
from neurips26.bip.sharded import ShardedAllocator
from neurips26.bip.renderer import N_ID, render, sample_nuisance
from neurips26.bip.vlfw import (auc_eer, protocol1, protocol2, protocol3_detector, protocol3_registry,
                                protocol4, tar_at_far, ten_fold_accuracy, verification_pairs)

__all__ = ["GapAllocator", "ShardedAllocator", "Audit", "BatchLog", "audit", "enrollment_robustness", "exact_energy", "kernel",
           "riemannian_step", "b1_uniform_sphere", "b2_in_manifold", "b3_rejection", "b4_hyperface",
           "b5_orthogonal", "cap_fraction", "containment_fraction", "ellipsoid_ratio",
           "log10_ellipsoid_ratio", "packing_bounds", "ArcFaceHead", "PCAReport", "Subspace", "VirtualIndex", "as_unit",
           "collisions", "faiss_index", "impostor_scores", "knn", "margin", "maxcos", "maxcos_faiss",
           "pca_report", "synthetic_gallery", "tau_far", "within_spread", "auc_eer", "tar_at_far",
           "ten_fold_accuracy", "render", "sample_nuisance", "N_ID", "Checkpoint", "EncoderConfig", "FREncoder",
           "check_images", "embed", "identity_centers", "load_checkpoint", "train_encoder", "GapGen",
           "GapGenConfig", "Generator", "PatchCritic", "frechet_distance", "identity_consistency",
           "image_collisions", "slerp", "protocol1", "protocol2", "protocol3_detector", "protocol3_registry",
           "protocol4", "verification_pairs"]
