"""The Euclidean projection onto the probability simplex.

Used on the server side by the frequency oracles' standard errors (a plug-in distribution) and by
``analysis.postprocess`` (Norm-Sub). See docs/math/postprocessing.md.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["project_simplex"]


def project_simplex(
    values: npt.ArrayLike,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Euclidean projection of each row onto the probability simplex, and the shift theta.

    Duchi, Shalev-Shwartz, Singer, Chandra, ICML 2008, Figure 1: sort descending,
    rho = max{j : u_j - (sum_{r<=j} u_r - 1)/j > 0}, theta = (sum_{r<=rho} u_r - 1) / rho, output
    max(v - theta, 0). This equals the Norm-Sub of Wang, Lopuhaä-Zwakenberg, Li, Škorić, Li
    (NDSS 2020). O(k log k) per row. Returns arrays shaped like ``values`` and like ``values``
    without its last axis.

    >>> projected, theta = project_simplex([1.0, 0.5, -0.25])
    >>> projected.tolist(), float(theta)
    ([0.75, 0.25, 0.0], 0.25)
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 0 or v.shape[-1] == 0:
        raise ValueError(f"values must have at least one item; got shape {v.shape}")
    if not np.all(np.isfinite(v)):
        raise ValueError("values must be finite to be projected onto the simplex")
    u = -np.sort(-v, axis=-1)
    excess = np.cumsum(u, axis=-1) - 1.0
    j = np.arange(1, v.shape[-1] + 1, dtype=np.float64)
    positive = u - excess / j > 0  # True for j = 1 .. rho, False after (Duchi et al., Lemma 2)
    rho = np.sum(positive, axis=-1)
    theta = np.take_along_axis(excess, (rho - 1)[..., None], axis=-1)[..., 0] / rho
    return np.maximum(v - theta[..., None], 0.0), theta
