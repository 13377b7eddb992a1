"""Nexus: an optimizer wrapper that steers pretraining toward common minima of all data sources.

    from neurips26.nexus import Nexus, SourceSampler
    opt = Nexus(model.parameters(), outer=torch.optim.AdamW(model.parameters(), lr=3e-3), inner_lr_ratio=0.1)
    opt.step(sampler.next_step(), lambda batch: loss(model, batch))   # K single-source micro-batches
"""

from neurips26.nexus.base import MicroBatch
from neurips26.nexus.baselines import (Fish, GradAccumulation, GradVac, Lookahead, PCGrad, gradvac_project,
                                       pcgrad_project)
from neurips26.nexus.data import CharVocab, CorpusUnavailableError, Source, lm_loss, tiny_llama
from neurips26.nexus.measures import arithmetic_exact_match, closeness, gradient_similarity
from neurips26.nexus.optimizer import Nexus
from neurips26.nexus.outer import make_outer
from neurips26.nexus.schedule import SourceSampler, SourceSchedule, largest_remainder

__all__ = ["Nexus", "MicroBatch", "SourceSampler", "SourceSchedule", "largest_remainder", "GradAccumulation",
           "Fish", "Lookahead", "PCGrad", "GradVac", "pcgrad_project", "gradvac_project", "make_outer",
           "gradient_similarity", "closeness", "arithmetic_exact_match", "CharVocab", "Source",
           "CorpusUnavailableError", "tiny_llama", "lm_loss"]
