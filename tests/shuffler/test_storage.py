"""The shuffler's database: duplicates by a keyed digest, batches only from min_batch, an order
independent of arrival (a rank-correlation test), deletion only of the acknowledged batch."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from shuffler.storage import ShufflerStorage, csprng_permutation

Z_LIMIT = 4.0
"""|z| beyond 4 for an independent order has probability 6.3e-5 (two-sided normal)."""


def _envelope(i: int) -> str:
    return json.dumps({"key_id": "0" * 16, "sealed": f"marker{i:06d}"})


def test_nothing_is_batched_below_min_batch_and_retries_are_duplicates(tmp_path: Path) -> None:
    with ShufflerStorage(tmp_path / "s.db") as storage:
        reports = [(f"{i:032x}", _envelope(i)) for i in range(9)]
        assert storage.accept("c", "cfg", reports) == (9, 0)
        assert storage.accept("c", "cfg", reports[:3]) == (0, 3)
        assert storage.form_batch("c", 10, 100) is None
        assert storage.pending_counts() == {"c": 9}
        storage.accept("c", "cfg", [(f"{99:032x}", _envelope(99))])
        batch_id = storage.form_batch("c", 10, 100)
        assert batch_id is not None and storage.pending_counts() == {}
        (batch,) = storage.open_batches()
        assert batch[0] == batch_id and len(batch[3]) == 10
        assert storage.delete_batch(batch_id) == 10 and storage.open_batches() == []
    raw = (tmp_path / "s.db").read_bytes()
    assert f"{5:032x}".encode() not in raw  # device ids are never stored


def test_the_forwarded_order_is_independent_of_the_arrival_order(tmp_path: Path) -> None:
    """Spearman's rho between arrival and forwarded position: under independence
    rho sqrt(n - 1) is about N(0, 1), so |z| > 4 happens with probability 6.3e-5."""
    n = 2000
    with ShufflerStorage(tmp_path / "s.db") as storage:
        for start in range(0, n, 100):  # arrivals in 20 uploads
            storage.accept(
                "c", "cfg", [(f"{i:032x}", _envelope(i)) for i in range(start, start + 100)]
            )
        assert storage.form_batch("c", n, n) is not None
        (batch,) = storage.open_batches()
    arrival = np.array([int(json.loads(env)["sealed"][6:]) for _, env in batch[3]])
    assert sorted(arrival.tolist()) == list(range(n))
    rho = np.corrcoef(arrival, np.arange(n))[0, 1]  # ranks already: both are permutations
    assert abs(rho * math.sqrt(n - 1)) < Z_LIMIT


def test_the_permutation_is_uniform_on_three_items() -> None:
    """All 6 orders of 3 items equally likely: chi-square, 5 degrees of freedom, 30000 draws;
    the 1e-4 critical value is 25.74."""
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(30_000):
        key = tuple(csprng_permutation(3).tolist())
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 6
    chi2 = sum((c - 5_000) ** 2 / 5_000 for c in counts.values())
    assert chi2 < 25.74
