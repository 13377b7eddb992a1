import pytest

from neurips26.nas import random_mdp


@pytest.fixture(scope="session")
def quick_instances():
    """The two frozen quick-config instances (U_o ~ 80)."""
    return [random_mdp(2, 2, seed=14), random_mdp(3, 2, seed=13)]
