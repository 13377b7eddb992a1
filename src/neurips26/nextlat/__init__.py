"""NextLat: next-latent prediction as an auxiliary loss, with self-speculative decoding (arXiv 2511.05963).

    from neurips26.nextlat import NextLatForCausalLM, tiny_llama, self_speculative_generate
    m = NextLatForCausalLM(tiny_llama(vocab=100), d=1); m(ids).loss.backward()
    tokens, stats = self_speculative_generate(m, prompt, 64, gamma=4, top_k=1); stats.tokens_per_forward
"""

from neurips26.nextlat.baselines import MTPForCausalLM, mtp_speculative_generate
from neurips26.nextlat.distributed import train_data_parallel
from neurips26.nextlat.latent_dynamics import LatentDynamics, latent_width
from neurips26.nextlat.metrics import effective_rank, probe_accuracy, speedup_bound
from neurips26.nextlat.model import NextLatForCausalLM, NextLatOutput, gpt_loss, kl_forward, tiny_llama
from neurips26.nextlat.speculative import (SpecStats, greedy_generate, normalize, self_speculative_generate,
                                           speculative_accept)

__all__ = ["LatentDynamics", "latent_width", "NextLatForCausalLM", "NextLatOutput", "gpt_loss", "kl_forward",
           "tiny_llama", "self_speculative_generate", "greedy_generate", "speculative_accept", "normalize",
           "SpecStats", "effective_rank", "probe_accuracy", "speedup_bound", "MTPForCausalLM",
           "mtp_speculative_generate", "train_data_parallel"]
