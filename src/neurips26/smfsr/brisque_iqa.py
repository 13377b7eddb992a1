"""BRISQUE (Mittal et al. 2012) through the ``brisque`` 0.2.0 wheel, wrapped for numpy 2.

The wheel ships its LIVE-trained SVR (``models/svm.txt``) and feature scaling (``normalize.pickle``) and
needs ``libsvm-official`` and OpenCV (``cv2.resize``). Under numpy 2 its ``scale_features`` fails because
each of the 36 features is a 1-element array (``float(array([x]))`` of a 1-D array is refused): the
wrapper flattens the features to 36 floats first and then does what the wheel does
(``-1 + 2 (f - min) / (max - min)``, SVR probability estimate). Lower = better quality; for whole images
(full scale), not 16 x 16 patches.
"""

from __future__ import annotations

import functools

import numpy as np

N_FEATURES = 36  # 18 per scale, 2 scales


@functools.lru_cache(maxsize=1)
def _model():
    try:
        from brisque import BRISQUE
    except ImportError as e:
        raise ImportError("BRISQUE needs the brisque 0.2.0 wheel with libsvm-official and "
                          "opencv-python-headless (pip install 'neurips26[smfsr]')") from e

    class _Numpy2BRISQUE(BRISQUE):
        def scale_features(self, features):
            flat = np.concatenate([np.asarray(f, dtype=np.float64).reshape(-1) for f in features])
            if flat.shape[0] != N_FEATURES:
                raise ValueError(f"BRISQUE expects {N_FEATURES} features, got {flat.shape[0]}")
            lo = np.asarray([float(np.asarray(x).reshape(-1)[0]) for x in self.scale_params["min_"]])
            hi = np.asarray([float(np.asarray(x).reshape(-1)[0]) for x in self.scale_params["max_"]])
            return -1 + 2.0 / (hi - lo) * (flat - lo)

    return _Numpy2BRISQUE()


def brisque(img) -> float:
    """BRISQUE score of one image: (H, W) grey or (H, W, 3) RGB, float in [0, 1] or uint8; or a torch
    (C, H, W) / (1, C, H, W) tensor in [0, 1]. Raises ValueError for images below 32 x 32."""
    if hasattr(img, "detach"):  # torch tensor
        t = img.detach().cpu()
        if t.ndim == 4:
            if t.shape[0] != 1:
                raise ValueError(f"img must be one image, got a batch of {t.shape[0]}")
            t = t[0]
        if t.ndim != 3 or t.shape[0] not in (1, 3):
            raise ValueError(f"img must be (C, H, W) with C in (1, 3), got {tuple(t.shape)}")
        img = t.permute(1, 2, 0).double().numpy()
    arr = np.asarray(img)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[..., 0]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] != 3):
        raise ValueError(f"img must be (H, W) or (H, W, 3), got shape {arr.shape}")
    if min(arr.shape[:2]) < 32:
        raise ValueError(f"img must be at least 32 x 32 for BRISQUE, got {arr.shape[:2]}")
    if arr.dtype != np.uint8:
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)) or arr.min() < 0 or arr.max() > 1:
            raise ValueError("a float img must be finite and in [0, 1]")
    if arr.ndim == 2:
        arr = np.repeat(arr[..., None], 3, axis=2)  # the wheel converts RGB to grey itself
    return float(_model().score(arr))
