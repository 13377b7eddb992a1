"""Two perpendicular stacks (stacks=2): overlapping constraints, dense IPF, the I-projection identity."""

import numpy as np
import pytest

from neurips26.bridge import GaussianTargets, edm_sigmas, gaussian_ipf, kl
from neurips26.bridge.gaussian import DenseGaussian, TiltedGaussian
from neurips26.bridge.priors import separable_covariance
from neurips26.bridge.stacks import StackedProblem, stacked_annealed, stacked_ipf


def test_one_stack_equals_the_block_lift():
    p = StackedProblem.create((4, 2, 2), stacks=1)
    ours = stacked_ipf(p).dense()
    ref = DenseGaussian.of(gaussian_ipf(p.prior, GaussianTargets.default(4, 2, 2)))
    assert np.allclose(ours.cov, ref.cov, atol=1e-10) and np.allclose(ours.mean, ref.mean, atol=1e-10)


def test_two_stacks_meet_every_marginal_and_pythagoras():
    p = StackedProblem.create((3, 3, 3), stacks=2)
    pstar = stacked_ipf(p)
    law = pstar.dense()
    assert len(p.constraints) == 6
    for idx, m, S in p.constraints:
        assert np.max(np.abs(law.cov[np.ix_(idx, idx)] - S)) < 1e-10
        assert np.max(np.abs(law.mean[idx] - m)) < 1e-10
    # a feasible Q: the separable law 0.5 T (x) T (x) T with mean 0.5 has every rendered marginal
    Q = DenseGaussian(
        np.full(27, 0.5), 0.5 * np.kron(separable_covariance(3, 1, 0.3), separable_covariance(3, 3, 0.3))
    )
    for idx, m, S in p.constraints:
        assert np.allclose(Q.cov[np.ix_(idx, idx)], S, atol=1e-12)
    R = DenseGaussian.of(TiltedGaussian.untilted(p.prior))
    lhs, rhs = kl(Q, R), kl(Q, law) + kl(law, R)
    assert abs(lhs - rhs) < 1e-8 * lhs


def test_annealed_surrogate_on_two_stacks_converges():
    p = StackedProblem.create((3, 3, 3), stacks=2)
    target = stacked_ipf(p).dense()
    kls = [kl(q, target) for q in stacked_annealed(p, edm_sigmas(64))]
    assert kls[-1] < 1e-6 < kls[0]


def test_stacks_two_needs_a_cubic_volume():
    with pytest.raises(ValueError, match="cubic"):
        StackedProblem.create((4, 4, 5), stacks=2)
    with pytest.raises(ValueError, match="stacks"):
        StackedProblem.create((4, 4, 4), stacks=3)
