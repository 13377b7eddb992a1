"""Bilateral payoff uncertainty (spec §6; ASSUMPTION on the protocol -- the abstract only names it).

  * The optimizer plans with A_hat = A + E, E_ij ~ N(0, sigma_o^2): x_hat* and delta come from A_hat.
  * The learner receives noisy losses A^T x_t + xi_t, xi_t ~ N(0, sigma_l^2 I) (still FTRL, same eta).
  * Variant A: the optimizer predicts y_t from its own model (A_hat, noise-free losses; it never sees
    xi_t). Variant B: it observes the learner's mixed strategy y_t; only the matrix is uncertain.
  * The surplus is always evaluated with the true A and the true value v.
Open-loop strategies (FixedMaxMin, SweepThenAlternate) never look at y_t, so for them A and B coincide;
the variants differ for adaptive ones (MyopicBestResponse).
"""

from __future__ import annotations

import numpy as np

from neurips26.ftrl_surplus.games import check_payoff
from neurips26.ftrl_surplus.learners import FTRL
from neurips26.ftrl_surplus.simulator import PlayResult, play
from neurips26.ftrl_surplus.strategies import Strategy
from neurips26.harness.validation import check_array, check_choice, check_scalar

VARIANTS = ("A", "B")


def perturbed_model(A, sigma_o, seed: int = 0) -> np.ndarray:
    """A_hat = A + sigma_o Z, Z_ij ~ N(0, 1) from ``default_rng(seed)``: (n, m), or (S, n, m) for a grid
    of S values of sigma_o (one Z for all, so the grid is a common-random-numbers comparison)."""
    A = check_payoff(A)
    sig = check_array(sigma_o, "sigma_o", ndim=(0, 1), dtype=float)
    if np.any(sig < 0):
        raise ValueError(f"sigma_o must be >= 0, got {sig.min():.3g}")
    rng = np.random.default_rng(check_scalar(seed, "seed", int, min=0))
    Z = rng.standard_normal(A.shape)
    return A + sig[..., None, None] * Z if sig.ndim else A + float(sig) * Z


def bilateral_play(A, learner: FTRL, strategy: Strategy, T: int, sigma_o=0.0,
                   sigma_l: float = 0.0, variant: str = "A", seed: int = 0) -> PlayResult:
    """Play under bilateral uncertainty: the optimizer's model A_hat, the learner's noisy losses.

    sigma_o: a scalar, or a grid (one batched run per value). seed: E is drawn from seed, the loss
    noise from seed + 1 (independent streams).
    """
    check_choice(variant, "variant", VARIANTS)
    sigma_l = check_scalar(sigma_l, "sigma_l", float, min=0.0)
    seed = check_scalar(seed, "seed", int, min=0)
    A_hat = perturbed_model(A, sigma_o, seed)
    return play(A, learner, strategy, T, model=A_hat, loss_noise=sigma_l,
                observe="model" if variant == "A" else "exact", seed=seed + 1)
