"""The device view: the privacy a device spends over its reports, across campaigns.

>>> from client_sdk import mechanism_from_config
>>> m = mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 8})
>>> account = device_privacy(m, reports=100)
>>> round(account.epsilon_at(1e-6), 3) <= 100 * 1.0
True

Each mechanism becomes one step, as exactly as its form allows:

- a frequency oracle through its exact channel (``channel_matrices()``, the implemented
  probabilities): the PLD of the worst pair of rows, or of their envelope when no single pair
  dominates; GRR and unary encoding (SUE, OUE) directly from their implemented p* and q* at
  any k (the tests check these against the enumerated channel);
- ``gaussian`` (``.sigma`` and its L2 sensitivity) through Gaussian DP, mu = sensitivity/sigma.
  The SDK's grid-sampled noise is a post-processing of a continuous Gaussian at least that wide
  (see ``client_sdk.mechanisms.gaussian``), so this is its claim and an upper bound;
- a memoized mechanism (RAPPOR, ``epsilon_inf``) through its *permanent* randomized response,
  once per distinct value (see :func:`device_privacy`);
- anything else through its claim (``privacy_epsilon``, ``privacy_delta``) and the worst case of
  an (epsilon, delta)-DP report, which is exact for randomized response and an upper bound
  otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from analysis.accounting._pld import DiscretePLD
from analysis.accounting._validation import check_count
from analysis.accounting.account import PrivacyAccount, Step
from analysis.accounting.hull import envelope
from analysis.accounting.steps import (
    approximate_dp,
    gaussian,
    randomized_response_from,
    unary_encoding_from,
)
from client_sdk.mechanisms import mechanism_from_config
from client_sdk.mechanisms.base import FrequencyOracle, Mechanism
from client_sdk.mechanisms.memoization import is_memoized
from client_sdk.mechanisms.rappor import RAPPOR

MechanismLike = Mechanism | Mapping[str, Any] | PrivacyAccount

MAX_CHANNEL_PAIRS = 5000
"""Most ordered pairs of distinct channel rows enumerated for one mechanism."""
MAX_CHANNEL_WORK = 20_000_000
"""Most (pair, output) cells enumerated for one mechanism; beyond, the claim is used."""


def from_channel(mechanism: Mechanism, *, stage: str | None = None) -> PrivacyAccount:
    """One report of a mechanism that enumerates its exact implemented channel.

    Every ordered pair of distinct rows of every ``channel_matrices()`` matrix gives a PLD; the
    step is their envelope (the worst pair when one dominates, as for every symmetric oracle).
    Conditioning on public randomness (a hash seed) is covered by taking the worst matrix,
    which is an upper bound on the mixture. ``stage`` is passed to ``channel_matrices`` when
    given (RAPPOR's ``"permanent"``). Raises ValueError when the channel is too large to
    enumerate (the mechanism's own limit, or more than ``MAX_CHANNEL_PAIRS`` pairs or
    ``MAX_CHANNEL_WORK`` cells) or the mechanism has no channel.
    """
    channel = getattr(mechanism, "channel_matrices", None)
    if not isinstance(mechanism, Mechanism) or channel is None:
        raise ValueError(f"mechanism must enumerate its channel; got {type(mechanism).__name__}")
    plds: dict[tuple[bytes, bytes, float], DiscretePLD] = {}
    pairs = work = 0
    try:
        matrices = list(channel() if stage is None else channel(stage=stage))
    except NotImplementedError as exc:
        raise ValueError(f"{mechanism.name} does not enumerate its channel") from exc
    for matrix in matrices:
        rows = np.unique(np.asarray(matrix, dtype=np.float64), axis=0)
        u = rows.shape[0]
        pairs += u * (u - 1)
        work += u * (u - 1) * rows.shape[1]
        if pairs > MAX_CHANNEL_PAIRS or work > MAX_CHANNEL_WORK:
            raise ValueError(
                f"the channel of {mechanism.name} is too large to enumerate: "
                f"{pairs} row pairs so far (limit {MAX_CHANNEL_PAIRS})"
            )
        seen: set[bytes] = set()
        for i in range(u):
            for j in range(u):
                if i == j:
                    continue
                # The pair's PLD depends only on the multiset of (P, Q) columns.
                columns = np.stack([rows[i], rows[j]], axis=1)
                key = columns[np.lexsort((columns[:, 1], columns[:, 0]))].tobytes()
                if key in seen:
                    continue
                seen.add(key)
                pld = DiscretePLD.from_distributions(rows[i], rows[j])
                plds.setdefault((pld.losses.tobytes(), pld.masses.tobytes(), pld.inf_mass), pld)
    if not plds:
        raise ValueError(f"the channel of {mechanism.name} has a single distinct row")
    pld = envelope(list(plds.values()))
    claim = (pld.max_loss, 0.0) if pld.inf_mass == 0 else None
    k = getattr(mechanism, "k", None)
    what = "channel" if stage is None else f"{stage} channel"
    label = f"{mechanism.name}(eps={pld.max_loss:.6g}, k={k}, {what})"
    return PrivacyAccount([(Step(label, 0.0, pld, None, claim), 1)])


def mechanism_privacy(mechanism: MechanismLike) -> PrivacyAccount:
    """The account of one report of ``mechanism`` (a Mechanism, a config dict, or an account)."""
    if isinstance(mechanism, PrivacyAccount):
        return mechanism
    if isinstance(mechanism, Mapping):
        mechanism = mechanism_from_config(mechanism)
    if not isinstance(mechanism, Mechanism):
        raise ValueError(
            f"mechanism must be a Mechanism, a config dict or a PrivacyAccount; "
            f"got {type(mechanism).__name__}"
        )
    claim = (float(mechanism.privacy_epsilon), float(mechanism.privacy_delta))
    if _is_memoized(mechanism):
        # Memoized (RAPPOR, "longitudinal" configs, dBitFlip, 1BitMean): all reports of one value
        # are a post-processing of its permanent randomized response, and they share it, so
        # per-report channels must NOT be composed (correlated reports can leak more than the
        # composition of their marginals). The step is the permanent response itself.
        permanent = _permanent_stage(mechanism)
        if permanent is not None:
            return permanent
        return approximate_dp(float(getattr(mechanism, "epsilon_inf")), 0.0)  # noqa: B009
    if mechanism.name == "gaussian" and hasattr(mechanism, "sigma"):
        return gaussian(
            sigma=float(mechanism.sigma), sensitivity=_l2_sensitivity(mechanism), claim=claim
        )
    if isinstance(mechanism, FrequencyOracle):
        if mechanism.name == "grr":
            return randomized_response_from(mechanism.p_star, mechanism.q_star, mechanism.k)
        if mechanism.name in ("sue", "oue"):
            return unary_encoding_from(mechanism.p_star, mechanism.q_star)
        try:
            return from_channel(mechanism)
        except ValueError:
            pass
    return approximate_dp(*claim)


def device_privacy(
    mechanism: MechanismLike, reports: int, *, distinct_values: int | None = None
) -> PrivacyAccount:
    """The composed account of ``reports`` reports of one mechanism by one device.

    ``device_privacy(m, 30).summary(1e-6)`` gives the per-report and composed epsilon, the
    attacker's advantage and the classical bounds as JSON-safe figures.

    For a memoized mechanism (RAPPOR) the step is the permanent randomized response of one
    value, spent once per *distinct* value: pass ``distinct_values`` when known (at most
    ``reports``); by default every report is assumed to carry a new value (the worst case).
    Other mechanisms draw fresh randomness per report and ignore ``distinct_values``.
    """
    reports = check_count(reports, "reports")
    step = mechanism_privacy(mechanism)
    if distinct_values is None:
        return step * reports
    distinct = check_count(distinct_values, "distinct_values")
    if distinct > reports:
        raise ValueError(f"distinct_values must be at most reports={reports}; got {distinct}")
    memoized = not isinstance(mechanism, PrivacyAccount) and _is_memoized(
        mechanism_from_config(mechanism) if isinstance(mechanism, Mapping) else mechanism
    )
    return step * (distinct if memoized else reports)


def device_account(history: Iterable[tuple[MechanismLike, int]]) -> PrivacyAccount:
    """A device's whole history: ``[(mechanism or config or account, reports), ...]``."""
    parts = []
    for index, entry in enumerate(history):
        if not (isinstance(entry, tuple) and len(entry) == 2):
            raise ValueError(f"history[{index}] must be a (mechanism, reports) pair; got {entry!r}")
        mechanism, reports = entry
        parts.append(
            mechanism_privacy(mechanism) * check_count(reports, f"history[{index}].reports")
        )
    if not parts:
        raise ValueError("history must list at least one (mechanism, reports) pair")
    return sum(parts[1:], parts[0])


def _l2_sensitivity(mechanism: Any) -> float:
    """The L2 diameter of the Gaussian mechanism's input set (docs/math/numeric.md)."""
    if hasattr(mechanism, "sensitivity"):
        return float(mechanism.sensitivity)
    clip_norm = getattr(mechanism, "clip_norm", None)
    if clip_norm is not None:
        return 2.0 * float(clip_norm)
    lower, upper = float(mechanism.lower), float(mechanism.upper)
    dim = getattr(mechanism, "dim", None) or 1
    return (upper - lower) * math.sqrt(dim)


def _is_memoized(mechanism: Mechanism) -> bool:
    """Reports of one value share a permanent response (RAPPOR, or ``is_memoized``)."""
    return isinstance(mechanism, RAPPOR) or is_memoized(mechanism)


def _permanent_stage(mechanism: Mechanism) -> PrivacyAccount | None:
    """The exact account of the permanent response, where its channel is small enough."""
    try:
        if isinstance(mechanism, RAPPOR):
            return from_channel(mechanism, stage="permanent")
        inner = getattr(mechanism, "inner", None)  # longitudinal: the oracle at epsilon_permanent
        if isinstance(inner, FrequencyOracle):
            return mechanism_privacy(inner)
    except ValueError:
        pass
    return None
