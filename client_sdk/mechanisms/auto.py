"""``auto``: the frequency oracle with the least exact total error for (k, epsilon).

``mechanism_from_config({"mechanism": "auto", "epsilon": e, "k": k})`` builds every registered
candidate (grr, hr, blh, olh, ss, oue, sue) for that k and epsilon through the registry, ranks them
by ``FrequencyOracle.total_variance()`` (the exact E||f_hat - f||^2 of REFERENCE.md section 0, from
each candidate's implemented probabilities; Wang et al., USENIX Security 2017, compare the same
quantity) and returns the best one, marked ``selected_by="auto"``. Its config names the concrete
mechanism and all its parameters (the chosen subset size of ``ss``, say) plus
``"selected_by": "auto"``, so it round-trips and says what was picked and why.

Ties (total errors within a relative 1e-9, which is float noise: SS with d = 1 *is* GRR) go to the
candidate earlier in :data:`CANDIDATES`, ordered by report size: GRR's ceil(log2 k) bits first,
unary encoding's k bits last.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from client_sdk.mechanisms._validation import check_config_keys, check_epsilon, check_int
from client_sdk.mechanisms.base import FrequencyOracle, Mechanism
from client_sdk.mechanisms.registry import MECHANISMS, mechanism_from_config

CANDIDATES: tuple[str, ...] = ("grr", "hr", "blh", "olh", "ss", "oue", "sue")
"""Candidate names, cheapest report first (the tie-break order)."""

TIE_RTOL = 1e-9
"""Total errors this close (relatively) count as equal, and the cheaper report wins."""


def rank_candidates(epsilon: float, k: int) -> list[tuple[str, FrequencyOracle, float]]:
    """Every registered candidate that accepts (epsilon, k), with its exact total error.

    In :data:`CANDIDATES` order. A candidate whose constraints refuse this k (bit-vector
    mechanisms above their largest k, say) is left out.
    """
    epsilon = check_epsilon(epsilon)
    k = check_int(k, "k", minimum=2, maximum=(1 << 53) - 1)
    ranked: list[tuple[str, FrequencyOracle, float]] = []
    for name in CANDIDATES:
        if name not in MECHANISMS:
            continue
        try:
            candidate = mechanism_from_config({"mechanism": name, "epsilon": epsilon, "k": k})
        except ValueError:
            continue
        assert isinstance(candidate, FrequencyOracle)
        ranked.append((name, candidate, candidate.total_variance()))
    if not ranked:
        raise ValueError(f"no frequency oracle accepts k={k} and epsilon={epsilon}")
    return ranked


def select(epsilon: float, k: int) -> FrequencyOracle:
    """The candidate with the least total error (ties to the cheaper report), marked auto."""
    ranked = rank_candidates(epsilon, k)
    best = min(error for _, _, error in ranked)
    chosen = next(m for _, m, error in ranked if error <= best * (1 + TIE_RTOL))
    return dataclasses.replace(chosen, selected_by="auto")


class Auto(Mechanism):
    """The registry entry for ``auto``: a config-level selector, never instantiated.

    ``Auto.from_config`` returns the concrete oracle that :func:`select` picks (GRR, OUE, SS...),
    so everything downstream sees an ordinary mechanism whose config records the choice.
    """

    name: ClassVar[str] = "auto"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Any:
        """Pick and build the oracle for ``{"mechanism": "auto", "epsilon": e, "k": k}``."""
        check_config_keys(config, name=cls.name, required={"epsilon", "k"}, optional=set())
        if config.get("mechanism", cls.name) != cls.name:
            raise ValueError(f"mechanism must be {cls.name!r}; got {config.get('mechanism')!r}")
        return select(config["epsilon"], config["k"])
