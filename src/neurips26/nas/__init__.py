"""NaS: Navigate-and-Stop best-policy identification in tabular MDPs (deterministic rewards).

MDP tooling, the characteristic-time bound U(M, omega) and its navigation-constrained optimum
U_o(M) (DPP-compiled cvxpy problem), MDP-NaS with the delta-PAC stopping rule, its baselines, and
the diagnostics (connectivity, curvature) that the finite-delta analysis depends on.
"""

from neurips26.nas.agents import NaSConfig
from neurips26.nas.allocation import (
                                      Allocation,
                                      NavigationAllocator,
                                      optimal_allocation,
                                      project_to_omega,
                                      uniform_allocation,
)
from neurips26.nas.bound import BoundTerms, U, bound_terms, generative_optimum
from neurips26.nas.connectivity import (
                                      diameter,
                                      eta,
                                      is_communicating,
                                      kappa,
                                      mixing_time,
                                      path_length_m,
                                      stationary_state_action,
                                      uniform_mixing_time,
)
from neurips26.nas.diagnostics import curvature, instance_summary
from neurips26.nas.env import TabularEnv
from neurips26.nas.identify import ALGORITHMS, IdentificationResult, identify
from neurips26.nas.mdp import (
                                      MDP,
                                      double_chain,
                                      lazy_ring,
                                      policy_evaluation,
                                      policy_iteration,
                                      random_mdp,
                                      riverswim,
                                      solve_mdp,
                                      value_iteration,
)
from neurips26.nas.stopping import EmpiricalModel, stopping_statistic, threshold

__all__ = [
                                      "ALGORITHMS",
                                      "MDP",
                                      "Allocation",
                                      "BoundTerms",
                                      "EmpiricalModel",
                                      "IdentificationResult",
                                      "NaSConfig",
                                      "NavigationAllocator",
                                      "TabularEnv",
                                      "U",
                                      "bound_terms",
                                      "curvature",
                                      "diameter",
                                      "double_chain",
                                      "eta",
                                      "generative_optimum",
                                      "identify",
                                      "instance_summary",
                                      "is_communicating",
                                      "kappa",
                                      "lazy_ring",
                                      "mixing_time",
                                      "optimal_allocation",
                                      "path_length_m",
                                      "policy_evaluation",
                                      "policy_iteration",
                                      "project_to_omega",
                                      "random_mdp",
                                      "riverswim",
                                      "solve_mdp",
                                      "stationary_state_action",
                                      "stopping_statistic",
                                      "threshold",
                                      "uniform_allocation",
                                      "uniform_mixing_time",
                                      "value_iteration",
]
