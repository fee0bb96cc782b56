"""Envelopes of privacy loss distributions: one PLD dominating several (ROC hull geometry).

A channel with several pairs of rows (or a mixture over public randomness) is accounted by one
PLD whose hockey-stick curve is at least each pair's at every epsilon. Such a PLD is a dominating
pair in the sense of Zhu, Dong, Wang (AISTATS 2022), so its compositions are sound.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from analysis.accounting._pld import DiscretePLD


def envelope(plds: Sequence[DiscretePLD]) -> DiscretePLD:
    """A PLD dominating every one of ``plds`` (their delta curves' maximum, at every eps).

    If one of them dominates all the others (the usual case: symmetric channels) it is returned
    unchanged. Otherwise the upper concave hull of their ROC points (Q(S), P(S)) is built; its
    hockey-stick curve is the pointwise maximum of theirs (Legendre duality), and a pair with
    that curve dominates each of them in the sense of Zhu, Dong, Wang (AISTATS 2022), so
    compositions of it are sound. When ``plds`` is closed under swapping P and Q, the result
    is symmetric.
    """
    unique: dict[tuple[bytes, bytes, float], DiscretePLD] = {}
    for pld in plds:
        unique.setdefault((pld.losses.tobytes(), pld.masses.tobytes(), pld.inf_mass), pld)
    items = list(unique.values())
    if len(items) == 1:
        return items[0]
    items.sort(key=lambda p: float(p.delta(0.0)), reverse=True)
    for candidate in items:
        if all(_dominates(candidate, other) for other in items if other is not candidate):
            return candidate
    return _hull(items)


def _dominates(a: DiscretePLD, b: DiscretePLD) -> bool:
    if a.inf_mass < b.inf_mass - 1e-15:
        return False
    points = np.concatenate([a.losses, b.losses])
    return bool(np.all(a.delta(points) >= b.delta(points) - 1e-13))


def _hull(plds: Sequence[DiscretePLD]) -> DiscretePLD:
    xs = [np.array([0.0, 1.0])]
    ys = [np.array([0.0, 1.0])]
    for pld in plds:
        order = np.argsort(-pld.losses)
        w = pld.masses[order]
        qm = np.exp(np.log(w) - pld.losses[order])
        xs.append(np.concatenate([[0.0], np.cumsum(qm)]))
        ys.append(pld.inf_mass + np.concatenate([[0.0], np.cumsum(w)]))
    x = np.concatenate(xs)
    y = np.concatenate(ys)
    order = np.lexsort((-y, x))
    hull: list[tuple[float, float]] = []
    for xi, yi in zip(x[order], y[order], strict=True):
        if hull and xi == hull[-1][0]:
            continue  # same x: the first (largest y) is kept
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (yi - y1) - (y2 - y1) * (xi - x1) >= 0:
                hull.pop()
            else:
                break
        hull.append((float(xi), float(yi)))
    hx = np.array([h[0] for h in hull])
    hy = np.array([h[1] for h in hull])
    dx, dy = np.diff(hx), np.diff(hy)
    inf_mass = float(hy[0])
    finite = (dx > 0) & (dy > 0)
    losses = np.log(dy[finite]) - np.log(dx[finite])
    return DiscretePLD.from_atoms(losses, dy[finite], inf_mass)
