"""No Model Required (Mitchell, NeurIPS 2026): model-free Ĥ_K entropy-rate filtering of training text.

Ĥ_K = N·log2 N / Σ Λ_i (Kontoyiannis match-length estimator) computed from raw text, used to keep the
highest-entropy documents of each domain when fine-tuning on synthetic data, against collapse.
"""

from neurips26.entropy_filter.corpus import iter_scores, score_corpus
from neurips26.entropy_filter.estimators import ESTIMATORS, entropy_rate, hk
from neurips26.entropy_filter.filters import (CONDITIONS, GopherRules, gopher_pass, gopher_score,
                                              gopher_violations, per_domain_k, select, zlib_ratio)
from neurips26.entropy_filter.match_lengths import (lpf_lambdas, match_lengths, naive_lambdas,
                                                    window_lambdas)
from neurips26.entropy_filter.metrics import (diversity_metrics, distinct_n, rep_n, ttr_at, vocabulary)
from neurips26.entropy_filter.pipeline import HKDocumentFilter, datatrove_filter, domain_thresholds, hk_batch
from neurips26.entropy_filter.tokenize import (fast_tokenize, fnv, reported_tokenize, token_ids, tokenize)

__all__ = ["hk", "entropy_rate", "ESTIMATORS", "match_lengths", "naive_lambdas", "lpf_lambdas",
           "window_lambdas", "fast_tokenize", "reported_tokenize", "tokenize", "token_ids", "fnv",
           "distinct_n", "rep_n", "vocabulary", "ttr_at", "diversity_metrics", "select", "per_domain_k",
           "zlib_ratio", "gopher_violations", "gopher_pass", "gopher_score", "GopherRules", "CONDITIONS",
           "score_corpus", "iter_scores", "domain_thresholds", "HKDocumentFilter", "datatrove_filter",
           "hk_batch"]
