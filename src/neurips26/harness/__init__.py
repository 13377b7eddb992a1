"""The thin shared core: registry of papers, claims and verdicts, one run, the report."""

from neurips26.harness.paper import (FAILS, HOLDS, INCONCLUSIVE, Claim, ClaimResult, at_least, at_most,
                                     verdict)
from neurips26.harness.registry import PAPERS, Paper, get, load
from neurips26.harness.run import BenchRow, RunContext, bench_paper, run_paper

__all__ = ["Claim", "ClaimResult", "HOLDS", "FAILS", "INCONCLUSIVE", "verdict", "at_least", "at_most",
           "PAPERS", "Paper", "get", "load", "BenchRow", "RunContext", "run_paper", "bench_paper"]
