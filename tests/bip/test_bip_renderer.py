"""Acceptance check 8 (renderer; the encoder-TAR part is not implemented)."""

import pytest
import torch

from neurips26.bip.renderer import N_ID, render


def _g(s):
    return torch.Generator().manual_seed(s)


def test_renderer_deterministic_range_shape():
    ids = torch.randn(6, N_ID, generator=_g(0))
    a, b = render(ids, 24, _g(1)), render(ids, 24, _g(1))
    assert a.shape == (6, 1, 24, 24) and torch.equal(a, b)
    assert float(a.min()) >= 0 and float(a.max()) <= 1


def test_renderer_sensitive_to_identity_and_nuisance():
    ids = torch.randn(6, N_ID, generator=_g(0))
    base = render(ids, 32, _g(1))
    other = render(torch.randn(6, N_ID, generator=_g(5)), 32, _g(1))
    assert float((base - other).abs().mean()) > 0.01
    assert float((base - render(ids, 32, _g(2))).abs().mean()) > 0.01
    # a single identity parameter matters (eye separation), nuisance fixed
    ids2 = ids.clone()
    ids2[:, 2] += 2.0
    clean = render(ids, 32, _g(1), noise=0.0)
    assert float((clean - render(ids2, 32, _g(1), noise=0.0)).abs().mean()) > 0.005


def test_renderer_differentiable_and_validates():
    ids = torch.randn(2, N_ID, generator=_g(0), requires_grad=True)
    render(ids, 16, _g(1)).sum().backward()
    assert ids.grad is not None and float(ids.grad.abs().sum()) > 0
    with pytest.raises(ValueError, match="ids"):
        render(torch.randn(2, 13), 16)
    with pytest.raises(ValueError, match="size"):
        render(torch.randn(2, N_ID), 4)
