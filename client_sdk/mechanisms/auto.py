"""``auto``: the frequency oracle with the least exact total error among the candidates given.

``mechanism_from_config({"mechanism": "auto", "epsilon": e, "k": k})`` builds every registered
candidate (grr, hr, blh, olh, ss, oue, sue) for that k and epsilon, ranks them by
``FrequencyOracle.total_variance()`` (the exact E||f_hat - f||^2 of docs/math/subset-selection.md,
from each candidate's implemented probabilities; Wang et al., USENIX Security 2017, compare the
same quantity) and returns the best one, marked ``selected_by="auto"``. Its config names the
concrete mechanism and all its parameters (the chosen subset size of ``ss``, say) plus
``"selected_by": "auto"``, so it round-trips and says what was picked and why.

The selection itself (:func:`rank`, :func:`best`) takes a *builder*: a function from a candidate
name to the oracle it stands for (``ValueError`` when that candidate refuses the parameters). The
plain builder here goes through the registry; the longitudinal factory passes one that builds
memoized candidates, so both selections are one function.

Ties (total errors within a relative 1e-9, which is float noise: SS with d = 1 *is* GRR) go to the
candidate earlier in :data:`CANDIDATES`, ordered by report size: GRR's ceil(log2 k) bits first,
unary encoding's k bits last.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final, TypeVar

from client_sdk.mechanisms._validation import check_epsilon, check_int
from client_sdk.mechanisms.base import FrequencyOracle
from client_sdk.mechanisms.registry import MECHANISMS, mechanism_class

AUTO: Final = "auto"
"""The config name of the selector."""

CANDIDATES: tuple[str, ...] = ("grr", "hr", "blh", "olh", "ss", "oue", "sue")
"""Candidate names, cheapest report first (the tie-break order)."""

TIE_RTOL = 1e-9
"""Total errors this close (relatively) count as equal, and the cheaper report wins."""

Oracle = TypeVar("Oracle", bound=FrequencyOracle)

Builder = Callable[[str], Oracle]
"""Builds the candidate of a name; raises ``ValueError`` when it refuses the parameters."""


def rank(build: Builder[Oracle], what: str = "these parameters") -> list[tuple[str, Oracle, float]]:
    """Every registered candidate that ``build`` accepts, with its exact total error.

    In :data:`CANDIDATES` order. A candidate whose constraints refuse the parameters (bit-vector
    mechanisms above their largest k, say) is left out; ``ValueError`` when none is left.
    """
    ranked: list[tuple[str, Oracle, float]] = []
    for name in CANDIDATES:
        if name not in MECHANISMS:
            continue
        try:
            candidate = build(name)
        except ValueError:
            continue
        ranked.append((name, candidate, candidate.total_variance()))
    if not ranked:
        raise ValueError(f"no frequency oracle accepts {what}")
    return ranked


def best(build: Builder[Oracle], what: str = "these parameters") -> Oracle:
    """The candidate with the least total error, ties to the cheaper report."""
    ranked = rank(build, what)
    least = min(error for _, _, error in ranked)
    return next(m for _, m, error in ranked if error <= least * (1 + TIE_RTOL))


def plain_builder(epsilon: float, k: int) -> Builder[FrequencyOracle]:
    """Builds each candidate at (epsilon, k) through the registry."""

    def build(name: str) -> FrequencyOracle:
        oracle = mechanism_class(name).from_config({"mechanism": name, "epsilon": epsilon, "k": k})
        assert isinstance(oracle, FrequencyOracle)
        return oracle

    return build


def checked_parameters(epsilon: float, k: int) -> tuple[float, int]:
    """The (epsilon, k) of an ``auto`` config, checked."""
    return check_epsilon(epsilon), check_int(k, "k", minimum=2, maximum=(1 << 53) - 1)


def rank_candidates(epsilon: float, k: int) -> list[tuple[str, FrequencyOracle, float]]:
    """Every registered candidate that accepts (epsilon, k), with its exact total error."""
    epsilon, k = checked_parameters(epsilon, k)
    return rank(plain_builder(epsilon, k), f"k={k} and epsilon={epsilon}")


def select(epsilon: float, k: int) -> FrequencyOracle:
    """The candidate with the least total error (ties to the cheaper report), marked auto."""
    epsilon, k = checked_parameters(epsilon, k)
    chosen = best(plain_builder(epsilon, k), f"k={k} and epsilon={epsilon}")
    return dataclasses.replace(chosen, selected_by=AUTO)
