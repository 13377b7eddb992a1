"""Guards shared by every paper's tests."""

import sys


def pytest_collection_finish(session):
    """Fail at once, naming the cause, if importing a test module changed torch's default dtype: that leaks into
    every later test of every paper (float32 models fed float64 tensors) and fails them far from the cause."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_default_dtype() != torch.float32:
        raise RuntimeError(
            f"torch default dtype is {torch.get_default_dtype()} after collection: a test module sets it at import; "
            "set it in a fixture that restores it"
        )
