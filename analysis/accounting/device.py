"""The device view: the privacy a device spends over its reports, across campaigns.

>>> from client_sdk import mechanism_from_config
>>> m = mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 8})
>>> account = device_privacy(m, reports=100)
>>> round(account.epsilon_at(1e-6), 3) <= 100 * 1.0
True

Each mechanism describes one report by its privacy event (``mechanism.privacy_event()``,
:mod:`client_sdk.mechanisms.privacy`), and :func:`event_privacy` turns the event into one step,
as exactly as its form allows; nothing here looks at a mechanism's name or class:

- randomized response and unary encoding from their implemented probabilities at any k (the
  tests check these against the enumerated channel);
- a Gaussian event through Gaussian DP, mu = 1 / noise_multiplier. The SDK's grid-sampled noise
  is a post-processing of a continuous Gaussian at least that wide (see
  ``client_sdk.mechanisms.gaussian``), so this is its claim and an upper bound;
- a channel event through its exact channel (``channel_matrices()``): the PLD of the worst pair
  of rows, or of their envelope when no single pair dominates; its fallback claim where the
  channel is too large to enumerate;
- a permanent response (RAPPOR, ``longitudinal`` configs, memoized dBitFlip and 1BitMean) through
  its inner event, the permanent response itself, once per distinct value (see
  :func:`device_privacy`);
- a pure or approximate claim through the worst case of an (epsilon, delta)-DP report, which is
  exact for randomized response and an upper bound otherwise.
"""

from __future__ import annotations

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
from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.privacy import (
    ApproximateEvent,
    ChannelEvent,
    ChannelSource,
    GaussianEvent,
    PermanentResponseEvent,
    PrivacyEvent,
    PureEvent,
    RandomizedResponseEvent,
    UnaryEncodingEvent,
)

MechanismLike = Mechanism | Mapping[str, Any] | PrivacyEvent | PrivacyAccount

MAX_CHANNEL_PAIRS = 5000
"""Most ordered pairs of distinct channel rows enumerated for one mechanism."""
MAX_CHANNEL_WORK = 20_000_000
"""Most (pair, output) cells enumerated for one mechanism; beyond, the claim is used."""


def from_channel(mechanism: ChannelSource, *, stage: str | None = None) -> PrivacyAccount:
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
    if not isinstance(mechanism, ChannelSource) or channel is None:
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


def event_privacy(event: PrivacyEvent) -> PrivacyAccount:
    """The account of one report described by ``event``.

    A permanent response is accounted by its inner event: every report of one value is a
    post-processing of it and they share it, so per-report channels must NOT be composed
    (correlated reports can leak more than the composition of their marginals). Raises
    ValueError for an event this accounting does not know (it never guesses).
    """
    if isinstance(event, PermanentResponseEvent):
        return event_privacy(event.inner)
    if isinstance(event, RandomizedResponseEvent):
        return randomized_response_from(event.p, event.q, event.k)
    if isinstance(event, UnaryEncodingEvent):
        return unary_encoding_from(event.p, event.q)
    if isinstance(event, GaussianEvent):
        claim = None if event.claim is None else (event.claim.epsilon, event.claim.delta)
        return gaussian(event.noise_multiplier, claim=claim)
    if isinstance(event, ChannelEvent):
        try:
            return from_channel(event.source, stage=event.stage)
        except ValueError:
            return event_privacy(event.fallback)
    if isinstance(event, PureEvent):
        return approximate_dp(event.epsilon, 0.0)
    if isinstance(event, ApproximateEvent):
        return approximate_dp(event.epsilon, event.delta)
    raise ValueError(f"unsupported privacy event: {event!r}")


def mechanism_event(mechanism: MechanismLike) -> PrivacyEvent | None:
    """The privacy event of a mechanism, config dict or event (None for an account)."""
    if isinstance(mechanism, PrivacyAccount):
        return None
    if isinstance(mechanism, PrivacyEvent):
        return mechanism
    if isinstance(mechanism, Mapping):
        mechanism = mechanism_from_config(mechanism)
    if not isinstance(mechanism, Mechanism):
        raise ValueError(
            f"mechanism must be a Mechanism, a config dict, a PrivacyEvent or a PrivacyAccount; "
            f"got {type(mechanism).__name__}"
        )
    return mechanism.privacy_event()


def mechanism_privacy(mechanism: MechanismLike) -> PrivacyAccount:
    """The account of one report of ``mechanism`` (a Mechanism, a config dict, a privacy event
    or an account)."""
    if isinstance(mechanism, PrivacyAccount):
        return mechanism
    event = mechanism_event(mechanism)
    assert event is not None
    return event_privacy(event)


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
    event = mechanism_event(mechanism)
    step = mechanism_privacy(mechanism) if event is None else event_privacy(event)
    if distinct_values is None:
        return step * reports
    distinct = check_count(distinct_values, "distinct_values")
    if distinct > reports:
        raise ValueError(f"distinct_values must be at most reports={reports}; got {distinct}")
    memoized = isinstance(event, PermanentResponseEvent)
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
