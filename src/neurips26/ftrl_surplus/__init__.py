"""Strategic surplus against constant-step FTRL (Su & Vlatakis-Gkaragkounis, arXiv 2604.05129).

    from neurips26.ftrl_surplus import FTRL, SweepThenAlternate, play, core_appendix_game
    A = core_appendix_game(k=3, n_sub=4, seed=0)
    S_T = play(A, FTRL("entropic", eta=[0.01, 0.1]), SweepThenAlternate(), T=10_000).total
"""

from neurips26.ftrl_surplus.games import (GAP_TOL, GameSolution, core_appendix_game, matching_pennies,
                                          pure_equilibrium_game, random_game, rock_paper_scissors,
                                          solve_game)
from neurips26.ftrl_surplus.learners import FTRL, OptimisticHedge, multiplicative_weights
from neurips26.ftrl_surplus.predictions import (alternation_rate, alternation_susceptibility,
                                                continuous_surplus, elimination_round,
                                                euclidean_elimination_bound, fixed_surplus_curve,
                                                fixed_trajectory, ftrl_regret_bound, h_inf, matched_eta,
                                                optimal_projector, per_round_surplus,
                                                predicted_susceptibility, price_of_best_response, sandwich,
                                                sweeping_limit)
from neurips26.ftrl_surplus.regularizers import (DEFAULT_FIVE, Entropic, Euclidean, LogBarrier, Regularizer,
                                                 Tsallis, regularizer)
from neurips26.ftrl_surplus.simulator import PlayResult, naive_play, play
from neurips26.ftrl_surplus.strategies import (STRATEGIES, AADConstant, Alternating, CombinedOptimizer, Fixed,
                                               FixedMaxMin, MyopicBestResponse, PlayContext, Strategy,
                                               SweepThenAlternate, Uniform, aad_constant, continuous_payoff,
                                               search_delta)

__all__ = ["GAP_TOL", "GameSolution", "core_appendix_game", "matching_pennies", "pure_equilibrium_game",
           "random_game", "rock_paper_scissors", "solve_game", "FTRL", "OptimisticHedge",
           "multiplicative_weights", "alternation_rate", "alternation_susceptibility", "continuous_surplus",
           "elimination_round", "euclidean_elimination_bound", "fixed_surplus_curve", "fixed_trajectory",
           "ftrl_regret_bound", "h_inf", "matched_eta", "optimal_projector", "per_round_surplus",
           "predicted_susceptibility", "price_of_best_response", "sandwich", "sweeping_limit",
           "DEFAULT_FIVE", "Entropic", "Euclidean", "LogBarrier", "Regularizer", "Tsallis", "regularizer",
           "PlayResult", "naive_play", "play", "STRATEGIES", "AADConstant", "Alternating",
           "CombinedOptimizer", "Fixed", "FixedMaxMin", "MyopicBestResponse", "PlayContext", "Strategy",
           "SweepThenAlternate", "Uniform", "aad_constant", "continuous_payoff", "search_delta"]
