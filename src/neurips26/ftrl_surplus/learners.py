"""The learner: FTRL with a constant step size on the simplex (full or bandit feedback), and
optimistic Hedge as a harder-to-exploit reference.

    y_t = argmin_{y in Delta_m} eta <L_{t-1}, y> + h(y) = grad Phi(-eta L_{t-1}),  L_{t-1} = sum_{s<t} l_s,

with l_s = A^T x_s the loss vector of round s (full feedback). Optimistic FTRL adds the last loss as a
prediction of the next one: y_t = grad Phi(-eta (L_{t-1} + l_{t-1})). Under bandit feedback the learner
samples j_t ~ y_t, sees only l_{t, j_t} and feeds the importance-weighted estimate
l_hat_t = (l_{t, j_t} / y_{t, j_t}) e_{j_t} to the same FTRL update (the paper's appendix extension;
our reading: no explicit exploration mixing unless ``explore`` > 0, y_t <- (1 - gamma) y_t + gamma u_m).

``eta`` may be a scalar or one step size per game of a batch (an eta grid is a batch).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from neurips26.ftrl_surplus.regularizers import Regularizer, regularizer
from neurips26.harness.validation import check_array, check_choice, check_scalar

FEEDBACK = ("full", "bandit")


@dataclass(frozen=True, eq=False)
class FTRL:
    """A constant-step FTRL learner: ``FTRL("entropic", eta=0.1)``, ``FTRL(Tsallis(0.5), eta=[0.01, 0.1])``.

    regularizer: a name (``entropic``, ``euclidean``, ``tsallis-0.5``, ``log_barrier``) or a Regularizer.
    eta:         a positive step size, or one per game of the batch it plays.
    optimistic:  add the last loss as a prediction (optimistic FTRL).
    feedback:    ``full`` (sees A^T x_t) or ``bandit`` (sees one sampled entry; importance weighting).
    explore:     bandit exploration mixing gamma in [0, 1).
    """

    regularizer: "Regularizer | str" = "entropic"
    eta: "float | np.ndarray" = 0.1
    optimistic: bool = False
    feedback: str = "full"
    explore: float = 0.0
    reg: Regularizer = field(init=False, repr=False, compare=False)
    etas: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reg", regularizer(self.regularizer))
        etas = check_array(self.eta, "eta", ndim=(0, 1), dtype=float, min_size=1).reshape(-1)
        if np.any(etas <= 0):
            raise ValueError(f"eta must be > 0, got min {etas.min():.3g}")
        object.__setattr__(self, "etas", etas)
        if not isinstance(self.optimistic, (bool, np.bool_)):
            raise TypeError(f"optimistic must be a bool, got {type(self.optimistic).__name__}")
        check_choice(self.feedback, "feedback", FEEDBACK)
        check_scalar(self.explore, "explore", float, min=0.0, max=1.0, inclusive="left")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, FTRL) and self.reg == other.reg and np.array_equal(self.etas, other.etas)
                and (self.optimistic, self.feedback, self.explore)
                == (other.optimistic, other.feedback, other.explore))

    __hash__ = None  # type: ignore[assignment]  (eta may be an array)

    @property
    def name(self) -> str:
        return ("optimistic-" if self.optimistic else "") + self.reg.name

    def respond(self, L: np.ndarray, last: np.ndarray | None = None, eta: np.ndarray | None = None):
        """y = grad Phi(-eta (L + last)) for a batch of cumulative losses L (B, m)."""
        e = self.etas if eta is None else eta
        cum = L if (last is None or not self.optimistic) else L + last
        y = self.reg.map_unchecked(-e[:, None] * cum)
        if self.feedback == "bandit" and self.explore > 0:
            y = (1.0 - self.explore) * y + self.explore / y.shape[-1]
        return y


def OptimisticHedge(eta: "float | np.ndarray" = 0.1) -> FTRL:
    """Optimistic Hedge (entropic optimistic FTRL): the harder-to-exploit reference learner."""
    return FTRL("entropic", eta, optimistic=True)


def multiplicative_weights(losses, eta: float) -> np.ndarray:
    """The multiplicative-weights recursion y_{t+1} = y_t exp(-eta l_t) / Z_t from y_1 = u_m, shape (T, m).

    The reference entropic FTRL must equal (acceptance check 1).
    """
    loss = check_array(losses, "losses", ndim=2, dtype=float, min_size=1)
    eta = check_scalar(eta, "eta", float, min=0.0, inclusive="neither")
    T, m = loss.shape
    out = np.empty((T, m))
    y = np.full(m, 1.0 / m)
    for t in range(T):
        out[t] = y
        y = y * np.exp(-eta * loss[t])
        y /= y.sum()
    return out
