"""BRISQUE through the numpy-2 wrapper of the brisque 0.2.0 wheel (skips when it is not installed)."""

import numpy as np
import pytest

pytest.importorskip("brisque")
pytest.importorskip("cv2")

from neurips26.smfsr.brisque_iqa import brisque  # noqa: E402


def test_brisque_orders_clean_noisy_blurred():
    import skimage.data
    from scipy.ndimage import zoom

    im = skimage.data.astronaut()[::2, ::2] / 255.0  # 256 x 256 keeps the test short
    rng = np.random.default_rng(0)
    clean = brisque(im)
    noisy = brisque(np.clip(im + rng.normal(0, 0.08, im.shape), 0, 1))
    small = zoom(im, (0.25, 0.25, 1), order=1)
    blurred = brisque(np.clip(zoom(small, (4, 4, 1), order=1), 0, 1))
    assert clean < noisy and clean < blurred, (clean, noisy, blurred)


def test_brisque_bad_input():
    with pytest.raises(ValueError, match="32 x 32"):
        brisque(np.zeros((16, 16)))
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        brisque(np.full((40, 40), 2.0))
    with pytest.raises(ValueError, match="shape"):
        brisque(np.zeros((40, 40, 2)))
