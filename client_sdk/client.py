"""``TelemetryClient``: record values on the device, randomized at once, and upload them later.

    client = TelemetryClient("https://collector.example", state_dir="~/.cache/app-telemetry")
    client.record("app-theme", "dark")   # randomized now; only the randomized report is queued
    client.flush()                        # uploads with retries; returns how many were acknowledged
    client.status()                       # what is queued, dropped, clipped; the last error

Calls that never throw for the network. ``record`` raises only for programming errors (an
unknown label, a wrong type) and for :class:`~client_sdk.policy.PolicyViolation` (the app's own
policy refuses the campaign). Network state and the collector's answers never reach the app:
``flush`` returns how many reports were acknowledged and keeps the rest queued, and
:meth:`TelemetryClient.status` says what happened (the last error, when the next attempt is
due, the values dropped and clipped by campaign and reason). A campaign the device has neither
cached nor pinned (``campaigns=[document, ...]``, the documents the app ships), and cannot fetch,
has its value dropped, never stored raw, and counted. After a failed flush the next one waits an
exponential backoff with jitter (and at least the collector's ``Retry-After``); ``close`` and
leaving ``with`` flush within ``close_deadline`` seconds.

What happens to a value:

1. ``record`` takes the campaign from the documents the app pinned, else fetches it (once;
   cached in ``state_dir``), and verifies its ``config_id`` by recomputing it from the
   campaign's content (``client_sdk.protocol``), so the client never randomizes under
   parameters it cannot check.
2. The label becomes its index in the campaign's domain (an unknown label is a ``ValueError``
   and nothing is queued); numeric campaigns take numbers. A number outside the campaign's
   range is clipped to it, as the mechanism requires: counted in ``status()["clipped"]`` and
   logged once per campaign per :data:`CLIP_LOG_SECONDS` (the count, never the value).
3. :meth:`TelemetryClient._produce_reports` randomizes with the OS CSPRNG (``rng=None``) and
   encodes to the wire: the only place a report is produced. Mechanisms with memoized
   (permanent) responses -- ``"longitudinal"`` configs, ``dbitflip``, ``onebitmean``,
   ``rappor`` -- derive them from the keyed source ``secrets_store.DeviceKeys``: a device secret
   kept in ``state_dir`` (never sent), scoped by the campaign's ``config_id``.
   The on-device privacy ledger (``client_sdk.budget``) then authorizes the spend under the
   campaign's ``policy``: over budget, ``BudgetExceededError`` is raised and nothing is queued.
   Memoized values are charged their epsilon_inf once per distinct value.
4. The randomized payload gets a fresh random 128-bit report id and is appended to the outbox
   (SQLite, ``synchronous=FULL``). The raw value is never written or sent.
5. ``flush`` uploads queued reports in batches. A report leaves the outbox only when the
   collector acknowledged it (accepted, or duplicate: already stored). A rejected report is
   dropped with a logged reason. Network errors, ``408``, ``429`` and ``5xx`` are retried within
   the flush deadline; other ``4xx`` are not, and the reports they refused stay queued. The id
   is fixed at record time, so a retry after a crash or a lost response is a duplicate on the
   server, never a second report.

Secure-aggregation campaigns (a document with a ``"dap"`` object, docs/dap.md): the app's
policy must trust both Aggregators by URL and key (``PrivacyPolicy.check_dap``); ``record``
shards the value with Prio3 and seals both shares (``client_sdk.dap.upload.prepare_report``),
the ledger charges min(local, central) epsilon per report (a ``gaussian`` task's central
epsilon at the policy's ``max_central_delta``), and only the encoded ``Report``
enters the outbox; ``flush`` posts them to the Leader with the same retries, and maps DAP's
per-report errors to keep (``report_too_early``), delivered (``report_replayed``: a retry) or
dropped (the others, counted as ``dap:<error>``).

A stale config (the collector answers ``409`` with the ``stale-config`` problem type): the
client refetches the campaign once. Queued reports made under the old config are **dropped and
logged**: they were randomized under other parameters, cannot be uploaded under the new ones,
and cannot be re-randomized because the raw values are gone (by design).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
import os
import re
import secrets
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import requests

from client_sdk.budget import BudgetLedger, BudgetPolicy, BudgetStatus, Charge, LogEntry
from client_sdk.campaign import parse_campaign
from client_sdk.config import config_id
from client_sdk.dap.campaign import DapCampaign, b64decode, b64encode
from client_sdk.dap.messages import Report, ReportError, UploadErrors, UploadRequest
from client_sdk.dap.upload import prepare_report
from client_sdk.ledger_mac_chain import LedgerMacChain
from client_sdk.mechanisms import Mechanism
from client_sdk.mechanisms._validation import check_int, check_positive, shape_of
from client_sdk.mechanisms.memoization import is_memoized
from client_sdk.mechanisms.strings import count_reserved
from client_sdk.outbox import Outbox, QueuedReport
from client_sdk.policy import DEFAULT_POLICY, MAX_DOCUMENT_BYTES, PolicyViolation, PrivacyPolicy
from client_sdk.protocol import campaign_config_id, problem_type
from client_sdk.randomness import RandomSource
from client_sdk.sealing import seal_payloads
from client_sdk.secrets_store import DEVICE_SECRET_FILE, DeviceKeys, load_or_create_device_secret
from client_sdk.state import StateDir
from client_sdk.transport import (
    RETRY_STATUSES,
    make_session,
    retry_after_of,
    retry_after_seconds,
    set_deadline,
)

logger = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 500
DEFAULT_TIMEOUT = (5.0, 60.0)  # (connect, read) seconds
DEFAULT_FLUSH_DEADLINE = 120.0
"""Seconds one flush may take in all, retries and waits included."""
DEFAULT_CLOSE_DEADLINE = 5.0
"""Seconds ``close`` (and leaving ``with``) may spend flushing."""
FETCH_CONNECT_TIMEOUT = 2.0
"""Longest wait to connect when ``record`` fetches a campaign it has no document for."""
BACKOFF_BASE = 1.0
"""Seconds before the flush after the first failed one; doubles with each failure."""
BACKOFF_MAX = 3600.0
"""The longest backoff between flushes (and the longest ``Retry-After`` kept across them)."""
CLIP_LOG_SECONDS = 3600.0
"""Clipped values are logged at most once per campaign in this many seconds."""


class CampaignVerificationError(ValueError):
    """A fetched campaign whose content does not match its ``config_id`` (or this SDK)."""


class CampaignClosedError(ValueError):
    """The collector closed this campaign to new reports, or it expired (``reason``:
    ``campaign-closed`` or ``campaign-expired``); nothing more is recorded for it."""

    def __init__(self, message: str, reason: str = "campaign-closed") -> None:
        super().__init__(message)
        self.reason = reason


class CampaignChangedError(CampaignVerificationError):
    """The collector now serves another configuration under a campaign name this device uses.

    Nothing is randomized under the new configuration until the app calls
    :meth:`TelemetryClient.accept_campaign_change`; the change is in the privacy log.
    """

    def __init__(self, campaign: str, accepted: str, served: str) -> None:
        super().__init__(
            f"campaign {campaign!r} changed: this device accepted config_id {accepted}, the "
            f"collector now serves {served}; nothing is recorded for it until the app calls "
            f"accept_campaign_change({campaign!r})"
        )
        self.campaign = campaign
        self.accepted = accepted
        self.served = served


class UploadError(RuntimeError):
    """An upload (or a campaign fetch) that could not complete; ``acknowledged`` reports were
    stored before it.

    ``status`` and ``problem`` (the RFC 9457 document) are set when the collector answered,
    ``retry_after`` (seconds) when it asked to wait. :meth:`TelemetryClient.flush` and
    :meth:`TelemetryClient.record` never raise it: they report it in
    :meth:`TelemetryClient.status`. Unacknowledged reports stay in the outbox for the next flush.
    """

    def __init__(
        self,
        message: str,
        *,
        acknowledged: int = 0,
        status: int | None = None,
        problem: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.acknowledged = acknowledged
        self.status = status
        self.problem = dict(problem) if problem is not None else None
        self.retry_after = retry_after


@dataclasses.dataclass(frozen=True)
class Campaign:
    """A campaign as the client uses it, verified against its ``config_id``."""

    name: str
    mechanism: Mechanism
    config_id: str
    domain: tuple[str, ...] | None
    policy: dict[str, Any] | None
    min_batch_size: int
    document: dict[str, Any] = dataclasses.field(repr=False, compare=False)
    _index: dict[str, int] = dataclasses.field(repr=False, compare=False)

    @classmethod
    def from_document(cls, document: Any, *, name: str) -> Campaign:
        """Verify a campaign document: its ``config_id`` must be the hash of its content, its
        content a valid campaign (``client_sdk.campaign``, the collector's own check), its
        mechanism config canonical for this SDK."""
        if not isinstance(document, dict):
            raise CampaignVerificationError(f"campaign {name!r}: the document is not an object")
        try:
            mechanism_config = document["mechanism"]
            expected = campaign_config_id(
                mechanism=mechanism_config,
                domain=document.get("domain"),
                policy=document.get("policy"),
                min_batch_size=document["min_batch_size"],
                shuffle=document.get("shuffle"),
            )
            spec = parse_campaign(document, strict=False)
        except (KeyError, TypeError, ValueError) as error:
            raise CampaignVerificationError(
                f"campaign {name!r}: the document is not a valid campaign: {error}"
            ) from error
        if document.get("name") != name:
            raise CampaignVerificationError(
                f"asked for campaign {name!r}, got {document.get('name')!r}"
            )
        if document.get("config_id") != expected:
            raise CampaignVerificationError(
                f"campaign {name!r}: config_id {document.get('config_id')!r} does not match its "
                f"content (expected {expected})"
            )
        if spec.config != mechanism_config:
            raise CampaignVerificationError(
                f"campaign {name!r}: this SDK reads the mechanism config differently "
                f"({spec.config} != {mechanism_config}); update the SDK"
            )
        return cls(
            name=name,
            mechanism=spec.mechanism,
            config_id=expected,
            domain=spec.domain,
            policy=None if spec.policy is None else spec.policy.to_dict(),
            min_batch_size=spec.min_batch_size,
            document=document,
            _index={label: i for i, label in enumerate(spec.domain or ())},
        )

    def encode(self, values: Sequence[Any]) -> npt.NDArray[Any]:
        """Map labels to domain indices (categorical) or check numbers (numeric).

        Raises ``ValueError`` naming the first bad value and its position; nothing is queued.
        """
        kind = self.mechanism.value_kind
        if kind == "record":
            # Mappings attribute -> label; the mechanism checks them without echoing values.
            return self.mechanism.encode_records(values)  # type: ignore[attr-defined]
        if kind == "string":
            # The strings themselves (a domain, if any, is only the candidate list the analysis
            # estimates against); the mechanism's perturb validates them.
            return np.asarray(values, dtype=object)
        if kind == "category":
            assert self.domain is not None  # checked by parse_campaign
            index = self._index
            out = np.empty(len(values), dtype=np.int64)
            for position, label in enumerate(values):
                code = index.get(label) if isinstance(label, str) else None
                if code is None:
                    # The raw value is never echoed: error messages end up in logs.
                    preview = ", ".join(repr(v) for v in self.domain[:5])
                    more = ", ..." if len(self.domain) > 5 else ""
                    raise ValueError(
                        f"the value at position {position} ({shape_of(label)}) is not a label "
                        f"of campaign {self.name!r}; its domain has {len(self.domain)} labels: "
                        f"{preview}{more}"
                    )
                out[position] = code
            return out
        for position, value in enumerate(values):
            if value is None or isinstance(value, (bool, np.bool_, str, bytes)):
                raise ValueError(
                    f"the value at position {position} ({shape_of(value)}) of numeric "
                    f"campaign {self.name!r} must be a number"
                )
        try:
            numbers = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"values of numeric campaign {self.name!r} must be numbers (or equal-length "
                "vectors of numbers)"
            ) from None
        if not np.all(np.isfinite(numbers)):
            position = int(np.argwhere(~np.isfinite(numbers))[0][0])
            raise ValueError(
                f"the value at position {position} of numeric campaign {self.name!r} must be a "
                "finite number"
            )
        return numbers


AnyCampaign = Campaign | DapCampaign
"""A verified campaign: randomized on the device (:class:`Campaign`) or aggregated by a DAP
pair (:class:`~client_sdk.dap.campaign.DapCampaign`, docs/dap.md)."""


def verify_document(document: Any, *, name: str) -> AnyCampaign:
    """Verify a campaign document of either kind (a ``"dap"`` object makes it a
    secure-aggregation campaign); :class:`CampaignVerificationError` otherwise."""
    if isinstance(document, dict) and "dap" in document:
        try:
            return DapCampaign.from_document(document, name=name)
        except (KeyError, TypeError, ValueError) as error:
            raise CampaignVerificationError(
                f"campaign {name!r}: the document is not a valid secure-aggregation campaign: "
                f"{error}"
            ) from error
    return Campaign.from_document(document, name=name)


class TelemetryClient:
    """Records values under local differential privacy and uploads the randomized reports.

    :param base_url: the collector, e.g. ``https://collector.example``. Plain ``http://`` only
        to a loopback address, unless ``allow_insecure_http``.
    :param state_dir: directory of this client's secret, outbox, ledger and campaign cache
        (created 0700 if missing). One client per ``state_dir``, enforced by a lock
        (``client_sdk.state``): a second one raises ``StateDirLockedError``.
    :param policy: the app's :class:`~client_sdk.policy.PrivacyPolicy`, the floor no served
        campaign can lower (``client_sdk.policy``; the default is
        :data:`~client_sdk.policy.DEFAULT_POLICY`). A weaker campaign raises
        :class:`~client_sdk.policy.PolicyViolation` and nothing is randomized under it.
    :param campaigns: campaign documents the app ships (as ``GET /v1/campaigns/NAME`` serves
        them), pinned: used without the network, each verified against its ``config_id`` and
        the policy here (an error names ``campaigns[i]`` and the field). A served document with
        another ``config_id`` is refused and reported in :meth:`status`, never swapped in
        (:meth:`accept_campaign_change` is the app's way to take it).
    :param rng: randomness for ``perturb``; ``None`` (the default, and the only choice on a
        device) is the OS CSPRNG. Tests and simulations may pass a seeded
        ``numpy.random.Generator``. Report ids always come from ``secrets``.
    :param batch_size: reports per upload request.
    :param retries: retries per request (network errors, 408, 429, 5xx), with exponential
        backoff and jitter, honouring ``Retry-After``.
    :param flush_deadline: the longest one :meth:`flush` may take, retries and ``Retry-After``
        waits included (seconds); what is not uploaded by then stays queued.
    :param close_deadline: the longest :meth:`close` (and leaving ``with``) spends flushing.
    :param session: a ready ``requests.Session`` (its adapters then own the retries, and only
        the time between requests counts against the deadline).
    :param default_policy: a budget (``{"epsilon_per_report", "reports_per_period",
        "period_seconds"}``) for the app's policy, the same as ``policy.budget``.
    :param allow_insecure_http: accept ``http://`` to hosts that are not loopback.
    :param shuffler_url: the anonymizing shuffler (``ldp-shuffler``); a shuffled campaign's
        reports are sealed to the collector's key (``client_sdk.sealing``) and sent there only,
        never to the collector directly.
    :param shuffler_token: this install's credential for a shuffler that requires one (issued
        by the app operator, ``ldp-shuffler credentials issue``); sent to the shuffler only, as
        ``Authorization: Bearer``, never to the collector. Reports past the credential's quota
        stay queued and go in a later flush.

    Safe to share between threads; safe across process restarts (the outbox is durable and
    report ids are fixed at record time).
    """

    def __init__(
        self,
        base_url: str,
        *,
        state_dir: str | os.PathLike[str],
        policy: PrivacyPolicy | None = None,
        campaigns: Sequence[Mapping[str, Any]] | None = None,
        rng: RandomSource | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        retries: int = 5,
        backoff_factor: float = 0.25,
        timeout: float | tuple[float, float] = DEFAULT_TIMEOUT,
        flush_deadline: float = DEFAULT_FLUSH_DEADLINE,
        close_deadline: float = DEFAULT_CLOSE_DEADLINE,
        session: requests.Session | None = None,
        default_policy: Mapping[str, Any] | None = None,
        allow_insecure_http: bool = False,
        shuffler_url: str | None = None,
        shuffler_token: str | None = None,
    ) -> None:
        self.base_url = _check_base_url(base_url, allow_insecure_http=allow_insecure_http)
        self._insecure_http = allow_insecure_http
        self.shuffler_url = (
            None
            if shuffler_url is None
            else _check_base_url(shuffler_url, allow_insecure_http=allow_insecure_http)
        )
        if shuffler_token is not None and (
            not isinstance(shuffler_token, str) or _TOKEN.fullmatch(shuffler_token) is None
        ):
            raise ValueError(
                "shuffler_token must be the token the app operator issued (printable ASCII, no "
                "spaces, at most 256 characters)"
            )
        self._shuffler_headers = (
            {} if shuffler_token is None else {"Authorization": f"Bearer {shuffler_token}"}
        )
        check_int(batch_size, "batch_size", minimum=1)
        self.flush_deadline = check_positive(flush_deadline, "flush_deadline")
        self.close_deadline = check_positive(close_deadline, "close_deadline")
        if policy is not None and not isinstance(policy, PrivacyPolicy):
            raise ValueError(f"policy must be a PrivacyPolicy; got a {type(policy).__name__}")
        app_policy = policy or DEFAULT_POLICY
        if default_policy is not None:
            if app_policy.budget is not None:
                raise ValueError("give the budget once: in policy.budget or in default_policy")
            budget = BudgetPolicy.from_dict(default_policy)
            app_policy = dataclasses.replace(app_policy, budget=budget)
        self.policy = app_policy
        self.batch_size = batch_size
        self.timeout = timeout
        self._rng = rng
        self._state = StateDir(state_dir)
        try:
            existing_device = (self._state.path / DEVICE_SECRET_FILE).exists()
            self._secret = load_or_create_device_secret(self._state.path)
            self._outbox = Outbox(self._state.path)
            self._ledger = BudgetLedger(
                self._state.path, seal=LedgerMacChain(self._secret), expect_existing=existing_device
            )
        except BaseException:
            self._state.close()
            raise
        if self._ledger.damage is not None:
            logger.warning(
                "the privacy ledger in %s was damaged (%s): budgeted reports are refused "
                "until the current period ends",
                self._state.path,
                self._ledger.damage,
            )
        self._own_session = session is None
        self._session = session or make_session(retries=retries, backoff_factor=backoff_factor)
        # record() fetches a missing campaign once, without retries: it must not wait long.
        self._fetch_session = session or make_session(retries=0)
        self._campaigns: dict[str, AnyCampaign] = {}
        self._changed: dict[str, tuple[str, str]] = {}  # name -> (accepted, served) config ids
        self._closed: dict[str, str] = {}  # campaign -> campaign-closed or campaign-expired
        self._campaigns_lock = threading.Lock()
        self._counters: dict[str, collections.Counter[str]] = {}  # campaign -> name -> count
        self._rng_lock = threading.Lock()  # a numpy Generator is not thread-safe
        self._flush_lock = threading.Lock()
        # Per campaign, the values sent as a string mechanism's reserved symbol (counts only).
        self._reserved: Counter[str] = Counter()
        # What status() reports (counts and messages, never a value), under _status_lock.
        self._status_lock = threading.Lock()
        self._dropped: dict[str, Counter[str]] = {}  # campaign -> reason -> values dropped
        self._clipped: Counter[str] = Counter()
        self._clip_logged: dict[str, float] = {}  # campaign -> monotonic time of the last log
        self._last_error: dict[str, Any] | None = None
        self._failures = 0  # consecutive failed flushes
        self._next_attempt: float | None = None  # wall-clock time the next flush is due
        self._fetch_blocked: dict[str, float] = {}  # campaign -> monotonic time to fetch again
        self._jitter = secrets.SystemRandom()
        self._closed_client = False
        try:
            self._pinned = self._pin(campaigns)
        except BaseException:
            self._release()
            raise

    # ---- lifecycle -------------------------------------------------------------------------

    def _pin(self, documents: Sequence[Mapping[str, Any]] | None) -> dict[str, AnyCampaign]:
        """The app's campaign documents, verified and checked against the policy at once."""
        if documents is None:
            return {}
        if isinstance(documents, (str, bytes, Mapping)) or not isinstance(documents, Sequence):
            raise ValueError(
                f"campaigns must be a list of campaign documents; got a {type(documents).__name__}"
            )
        pinned: dict[str, AnyCampaign] = {}
        for i, document in enumerate(documents):
            name = document.get("name") if isinstance(document, Mapping) else None
            if not isinstance(name, str):
                raise CampaignVerificationError(
                    f"campaigns[{i}]: a campaign document with a string 'name' is required"
                )
            try:
                campaign = verify_document(dict(document), name=name)
            except CampaignVerificationError as error:
                raise CampaignVerificationError(f"campaigns[{i}]: {error}") from error
            if name in pinned:
                raise ValueError(f"campaigns[{i}]: campaign {name!r} is pinned twice")
            self._check_policy(campaign)
            pinned[name] = campaign
        return pinned

    def close(self, *, deadline: float | None = None) -> None:
        """Flush what is queued within ``deadline`` seconds (``close_deadline`` by default),
        then release the state directory. What was not sent stays queued on disk."""
        if self._closed_client:
            return
        try:
            if self._outbox.count():
                self.flush(force=True, deadline=deadline or self.close_deadline)
        finally:
            self._closed_client = True
            self._release()

    def _release(self) -> None:
        self._session.close()
        self._fetch_session.close()
        self._outbox.close()
        self._ledger.close()
        self._state.close()

    def __enter__(self) -> TelemetryClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def ledger_damage(self) -> str | None:
        """Why the privacy ledger was found damaged when this client started, if it was."""
        return self._ledger.damage

    # ---- campaigns -------------------------------------------------------------------------

    def campaign(self, name: str, *, refresh: bool = False) -> AnyCampaign:
        """The verified campaign ``name``: from memory, the on-disk cache, or the collector.

        A document the app pinned (``campaigns=``) is the accepted one for its name; otherwise
        the first configuration seen is. A different one served later raises
        :class:`CampaignChangedError` (and is noted in the privacy log and :meth:`status`) until
        the app calls :meth:`accept_campaign_change`. Either way the campaign must satisfy the
        app's policy (:class:`~client_sdk.policy.PolicyViolation` otherwise). Unlike
        :meth:`record`, this raises :class:`UploadError` when the campaign cannot be fetched.
        """
        return self._campaign(name, refresh=refresh, fetch_session=self._session)

    def _campaign(
        self, name: str, *, refresh: bool, fetch_session: requests.Session
    ) -> AnyCampaign:
        with self._campaigns_lock:
            if name in self._closed:
                reason = self._closed[name]
                raise CampaignClosedError(
                    f"campaign {name!r} takes no more reports ({reason})", reason
                )
            if name in self._changed:
                raise CampaignChangedError(name, *self._changed[name])
            if not refresh and name in self._campaigns:
                return self._campaigns[name]
            cached = self._outbox.cached_campaign(name)
            pinned = self._pinned.get(name)
            if pinned is not None and not refresh:
                campaign = pinned  # checked against the policy at construction
                if cached is None or cached.get("config_id") != pinned.config_id:
                    self._outbox.cache_campaign(name, pinned.document)
            elif cached is not None and not refresh:
                campaign = verify_document(cached, name=name)
                self._check_policy(campaign)
            else:
                document = self._fetch_campaign(name, session=fetch_session)
                campaign = verify_document(document, name=name)
                accepted = pinned.config_id if pinned is not None else None
                if accepted is None and cached is not None:
                    accepted = cached.get("config_id")
                if accepted is not None and accepted != campaign.config_id:
                    self._ledger.note(
                        name,
                        f"campaign changed: config_id {accepted} -> {campaign.config_id}; "
                        "refused until the app accepts it",
                    )
                    self._changed[name] = (str(accepted), campaign.config_id)
                    self._campaigns.pop(name, None)
                    raise CampaignChangedError(name, str(accepted), campaign.config_id)
                self._check_policy(campaign)
                self._outbox.cache_campaign(name, campaign.document)
            self._campaigns[name] = campaign
            return campaign

    def accept_campaign_change(self, name: str) -> AnyCampaign:
        """Accept the configuration the collector serves now for ``name`` (the app's decision).

        It must still satisfy the app's policy. Reports queued under the old configuration are
        dropped at the next flush (they cannot be uploaded under the new one). Noted in the
        privacy log.
        """
        with self._campaigns_lock:
            campaign = verify_document(self._fetch_campaign(name), name=name)
            self._check_policy(campaign)
            cached = self._outbox.cached_campaign(name)
            previous = None if cached is None else cached.get("config_id")
            if previous != campaign.config_id:
                self._ledger.note(
                    name, f"campaign change accepted: config_id {previous} -> {campaign.config_id}"
                )
            self._outbox.cache_campaign(name, campaign.document)
            self._changed.pop(name, None)
            self._campaigns[name] = campaign
            return campaign

    def _check_policy(self, campaign: AnyCampaign) -> None:
        try:
            if isinstance(campaign, DapCampaign):
                self.policy.check_dap(campaign)
                try:  # the Leader gets the reports: https, or http to loopback
                    _check_base_url(campaign.leader, allow_insecure_http=self._insecure_http)
                except ValueError as error:
                    raise CampaignVerificationError(
                        f"campaign {campaign.name!r}: the Leader's {error}"
                    ) from None
                return
            self.policy.check(
                campaign.name,
                campaign.mechanism,
                config_id=campaign.config_id,
                shuffle=campaign.document.get("shuffle"),
                through_shuffler=self.shuffler_url is not None,
            )
        except PolicyViolation as violation:
            self._ledger.note(campaign.name, f"campaign refused by the app's policy: {violation}")
            raise

    def _fetch_campaign(self, name: str, *, session: requests.Session | None = None) -> Any:
        url = f"{self.base_url}/v1/campaigns/{urllib.parse.quote(name, safe='')}"
        timeout = self.timeout
        if session is self._fetch_session and session is not self._session:
            timeout = _within(timeout, FETCH_CONNECT_TIMEOUT)
        try:
            response = (session or self._session).get(url, timeout=timeout, stream=True)
            try:
                body = _read_bounded(response, MAX_DOCUMENT_BYTES)
            finally:
                response.close()
        except requests.RequestException as error:
            raise UploadError(f"cannot fetch campaign {name!r}: {error}") from error
        if body is None:
            raise CampaignVerificationError(
                f"campaign {name!r}: the document is larger than {MAX_DOCUMENT_BYTES} bytes; "
                "refused unread"
            )
        if response.status_code != 200:
            problem = _problem_of(response, body)
            raise UploadError(
                f"cannot fetch campaign {name!r}: HTTP {response.status_code}: "
                f"{(problem or {}).get('detail', response.reason)}",
                status=response.status_code,
                problem=problem,
            )
        try:
            return json.loads(body)
        except ValueError as error:
            raise CampaignVerificationError(f"campaign {name!r}: not a JSON document") from error

    # ---- recording -------------------------------------------------------------------------

    def record(self, campaign: str, value: Any) -> str | None:
        """Randomize one value at once and queue only its randomized report; return its id.

        Never raises for network state or a collector's answer: when the campaign is not
        available (neither pinned, cached nor fetchable; changed, closed, or served unverifiable)
        the value is dropped, counted in :meth:`status`, and ``None`` returned. Raises
        ``ValueError`` for a value the campaign cannot take (an unknown label, a wrong type),
        :class:`~client_sdk.policy.PolicyViolation` when the app's policy refuses the campaign,
        and ``BudgetExceededError`` past the budget.
        """
        ids = self.record_many(campaign, [value])
        return ids[0] if ids else None

    def record_many(self, campaign: str, values: Sequence[Any]) -> list[str]:
        """Randomize many values at once (vectorized) and queue them; return their report ids.

        All or nothing: one unknown label raises ``ValueError`` before anything is queued. An
        unavailable campaign drops them all and returns ``[]`` (as :meth:`record`).
        """
        if not isinstance(campaign, str):
            raise TypeError(
                f"campaign must be a campaign name (str); got a {type(campaign).__name__}"
            )
        values = list(values)
        info = self._campaign_for_recording(campaign, len(values))
        if info is None:
            return []
        if isinstance(info, DapCampaign):
            return self._record_dap(info, values)
        encoded = info.encode(values)
        if len(encoded) == 0:
            return []
        self._count_clipped(info, encoded)
        return self._enqueue(info, self._produce_reports(info, encoded))

    def _campaign_for_recording(self, name: str, count: int) -> AnyCampaign | None:
        """The campaign, or ``None`` (the values dropped and counted) when it is unavailable.

        A failed fetch is not retried before the flush backoff would allow, so ``record`` does
        not wait on an unreachable collector again and again.
        """
        with self._campaigns_lock:
            ready = self._campaigns.get(name)
            if ready is not None and name not in self._changed and name not in self._closed:
                return ready
        known = name in self._pinned or self._outbox.cached_campaign(name) is not None
        with self._status_lock:
            blocked = self._fetch_blocked.get(name, 0.0) > time.monotonic()
        if blocked and not known:
            self._drop(name, "campaign-unavailable", count)
            return None
        try:
            return self._campaign(name, refresh=False, fetch_session=self._fetch_session)
        except CampaignChangedError:
            self._drop(name, "campaign-changed", count)
        except CampaignClosedError as error:
            self._drop(name, error.reason, count)
        except CampaignVerificationError as error:
            self._drop(name, "campaign-unverifiable", count, error)
        except UploadError as error:
            with self._status_lock:
                wait = max(self._backoff(max(self._failures, 1)), error.retry_after or 0.0)
                self._fetch_blocked[name] = time.monotonic() + wait
            self._drop(name, "campaign-unavailable", count, error)
        return None

    def _drop(self, campaign: str, reason: str, count: int, error: Exception | None = None) -> None:
        """Count values dropped unrecorded (never the values themselves)."""
        with self._status_lock:
            self._dropped.setdefault(campaign, Counter())[reason] += count
            if error is not None:
                self._note_error(campaign, error)
        logger.debug("campaign %r: %d value(s) dropped unrecorded: %s", campaign, count, reason)

    def _note_error(self, campaign: str | None, error: Exception) -> None:
        """Remember the last error for :meth:`status` (call under ``_status_lock``)."""
        self._last_error = {
            "at": time.time(),
            "campaign": campaign,
            "type": type(error).__name__,
            "status": getattr(error, "status", None),
            "message": str(error),
        }

    def _count_clipped(self, campaign: Campaign, encoded: npt.NDArray[Any]) -> None:
        """Count (and log once per campaign per :data:`CLIP_LOG_SECONDS`) the numbers outside
        the campaign's range, which the mechanism clips to it; never logs a value."""
        if campaign.mechanism.value_kind != "number":
            return
        clipped = _clipped_count(campaign.mechanism, encoded)
        if not clipped:
            return
        now = time.monotonic()
        with self._status_lock:
            self._clipped[campaign.name] += clipped
            total = self._clipped[campaign.name]
            last = self._clip_logged.get(campaign.name)
            due = last is None or now - last >= CLIP_LOG_SECONDS
            if due:
                self._clip_logged[campaign.name] = now
        if due:
            logger.warning(
                "campaign %r: %d value(s) outside its range were clipped to it, as the mechanism "
                "requires (%d since this client started; the estimated mean is biased toward "
                "the range); see status()['clipped']",
                campaign.name,
                clipped,
                total,
            )

    def _produce_reports(self, campaign: Campaign, encoded: npt.NDArray[Any]) -> list[Any]:
        """The one place a report is produced: randomize ``encoded`` values, encode to the wire,
        and have the privacy ledger authorize the spend before anything is queued.

        Randomizing before the ledger's check spends nothing: the reports have not left memory,
        and on a refusal they are discarded.
        """
        mechanism = campaign.mechanism
        memo_keys: list[str | None]
        lock = self._rng_lock if self._rng is not None else contextlib.nullcontext()
        with lock:
            if is_memoized(mechanism):
                keys = DeviceKeys(self._secret, memo_scope(campaign.name, mechanism))
                memoizing: Any = mechanism
                # perturb first: it refuses a bad value naming the campaign (_perturb)
                reports = self._perturb(campaign, encoded, permanent=keys)
                memo_keys = list(memoizing.memo_keys(encoded, permanent=keys))
                cost = float(memoizing.epsilon_inf)
            else:
                memo_keys = [None] * len(encoded)
                cost = mechanism.privacy_epsilon
                if mechanism.uses_device_choices:
                    keys = DeviceKeys(self._secret, memo_scope(campaign.name, mechanism))
                    reports = self._perturb(campaign, encoded, permanent=keys)
                else:
                    reports = self._perturb(campaign, encoded)
        payloads = mechanism.to_wire(reports)
        reserved = _reserved_count(mechanism, encoded)
        policy = self.policy.effective_budget(campaign.policy)
        if policy is not None:
            self._ledger.authorize_many(
                campaign.name,
                policy,
                [
                    Charge(epsilon=cost, memo_key=key, report=payload)
                    for key, payload in zip(memo_keys, payloads, strict=True)
                ],
            )
        counts = mechanism.device_counters(encoded)
        with self._campaigns_lock:
            self._counters.setdefault(campaign.name, collections.Counter()).update(counts)
        if reserved:
            with self._campaigns_lock:
                self._reserved[campaign.name] += reserved
        return payloads

    def _record_dap(self, campaign: DapCampaign, values: Sequence[Any]) -> list[str]:
        """A secure-aggregation campaign's reports (docs/dap.md, "What record does"): the
        values become Prio3 measurements (after ``local`` randomized response, if any), are
        sharded and sealed to the two Aggregators, authorized by the ledger and queued. Only
        the public share and the two ciphertexts reach the outbox."""
        measurements, clipped = campaign.measurements(values)
        if not measurements:
            return []
        if clipped:
            with self._status_lock:
                self._clipped[campaign.name] += clipped
        if campaign.local is not None:
            lock = self._rng_lock if self._rng is not None else contextlib.nullcontext()
            with lock:
                randomized = campaign.local.perturb(np.asarray(measurements), rng=self._rng)
            measurements = [campaign.prio3_measurement(v) for v in np.asarray(randomized)]
        else:
            measurements = [
                campaign.prio3_measurement(m) if campaign.vdaf_type == "count" else m
                for m in measurements
            ]
        now = time.time()
        # Report ids (the nonces of Prio3) always come from the OS CSPRNG, never from an
        # injected seeded generator: two simulated devices seeded alike would collide.
        reports = [prepare_report(campaign.task, m, now=now) for m in measurements]
        ids = [r.report_metadata.report_id.hex() for r in reports]
        policy = self.policy.effective_budget(campaign.policy)
        if policy is not None:
            # a gaussian task's rho-zCDP is charged as its epsilon at the app's delta; the ledger
            # adds epsilons (basic composition: k reports are (k eps, k delta)-DP), a valid but
            # looser account than the k rho-zCDP that rho's additivity gives
            charge = campaign.charge_at(self.policy.max_central_delta)
            self._ledger.authorize_many(
                campaign.name,
                policy,
                [Charge(epsilon=charge, report={"dap_report": i}) for i in ids],
            )
        rows = [
            (report_id, json.dumps(b64encode(report.encode())))
            for report_id, report in zip(ids, reports, strict=True)
        ]
        self._outbox.append(campaign.name, campaign.config_id, rows)
        return ids

    def counters(self, campaign: str) -> dict[str, int]:
        """What this client counted about the values it randomized for ``campaign`` since it
        started (``Mechanism.device_counters``; kept on the device, never sent): for ``pckv``,
        ``pckv_records_over_padding``, the records whose keys the estimates under-count."""
        with self._campaigns_lock:
            return dict(self._counters.get(campaign, {}))

    def _perturb(self, campaign: Campaign, encoded: npt.NDArray[Any], **keys: Any) -> Any:
        """The mechanism's ``perturb``; a value it refuses is named by campaign, not shown."""
        try:
            return campaign.mechanism.perturb(encoded, rng=self._rng, **keys)
        except ValueError as error:
            raise ValueError(f"campaign {campaign.name!r}: {error}") from None

    def status(self) -> dict[str, Any]:
        """What this client noticed, as counts and messages (never a value), since it started:

        * ``queued``: reports waiting in the outbox, per campaign (they survive restarts);
        * ``last_error``: ``{"at" (Unix time), "campaign", "type", "status" (HTTP, or None),
          "message"}`` of the last failed flush or campaign fetch, or ``None``;
        * ``next_attempt``: the Unix time before which :meth:`flush` does not try again
          (``None``: now), and ``consecutive_failures``;
        * ``dropped``: campaign -> reason -> values dropped unrecorded (``campaign-unavailable``:
          neither pinned, cached nor fetchable; ``campaign-changed``, ``campaign-closed``,
          ``campaign-expired`` (values recorded and reports queued once the collector said so),
          ``campaign-unverifiable``; for a secure-aggregation campaign, ``dap:<error>``: reports
          the Leader refused for good, e.g. ``dap:batch_collected``);
        * ``ended_campaigns``: campaign -> ``campaign-closed`` or ``campaign-expired``, for the
          campaigns the collector no longer takes reports for (nothing more is recorded);
        * ``clipped``: campaign -> numbers outside the range, clipped by the mechanism;
        * ``changed_campaigns``: campaign -> ``{"accepted", "served"}`` config ids of a campaign
          the collector now serves differently (refused until :meth:`accept_campaign_change`);
        * ``reserved_values``: per campaign, how many values a string mechanism could not carry
          (longer than its ``max_length``, a character outside its alphabet, not valid Unicode)
          and randomized as its reserved symbol instead (``client_sdk.mechanisms.strings``);
        * ``counters``: per campaign, what :meth:`counters` returns.
        """
        queued = {name: self._outbox.count(name) for name in self._outbox.campaigns()}
        with self._campaigns_lock:
            reserved = dict(sorted(self._reserved.items()))
            counters = {c: dict(counts) for c, counts in sorted(self._counters.items()) if counts}
            changed = {
                name: {"accepted": accepted, "served": served}
                for name, (accepted, served) in sorted(self._changed.items())
            }
            ended = dict(sorted(self._closed.items()))
        with self._status_lock:
            return {
                "reserved_values": reserved,
                "queued": queued,
                "last_error": None if self._last_error is None else dict(self._last_error),
                "next_attempt": self._next_attempt,
                "consecutive_failures": self._failures,
                "dropped": {c: dict(sorted(r.items())) for c, r in sorted(self._dropped.items())},
                "clipped": dict(sorted(self._clipped.items())),
                "changed_campaigns": changed,
                "ended_campaigns": ended,
                "counters": counters,
            }

    # ---- the user-visible privacy log -------------------------------------------------------

    def privacy_log(
        self, campaign: str | None = None, *, limit: int | None = None
    ) -> list[LogEntry]:
        """What this device sent under a budget (randomized reports and the epsilon each spent),
        and what it noticed (changed or refused campaigns, a damaged ledger)."""
        return self._ledger.history(campaign, limit=limit)

    def budget_status(self, campaign: str) -> BudgetStatus:
        """Spent and remaining budget of ``campaign`` in the current period."""
        info = self.campaign(campaign)
        policy = self.policy.effective_budget(info.policy)
        if policy is None:
            raise ValueError(f"campaign {campaign!r} has no budget policy on this device")
        return self._ledger.status(campaign, policy)

    def _enqueue(self, campaign: Campaign, payloads: Sequence[Any]) -> list[str]:
        """Give each payload a fresh random 128-bit id and append them to the outbox durably
        (a shuffled campaign's payloads sealed first: the outbox holds only the envelopes)."""
        if campaign.document.get("shuffle") is not None:
            payloads = _seal_all(campaign, payloads)
        raw = secrets.token_bytes(16 * len(payloads)).hex()
        ids = [raw[32 * i : 32 * (i + 1)] for i in range(len(payloads))]
        rows = [
            (report_id, json.dumps(payload, separators=(",", ":"), allow_nan=False))
            for report_id, payload in zip(ids, payloads, strict=True)
        ]
        self._outbox.append(campaign.name, campaign.config_id, rows)
        return ids

    # ---- uploading -------------------------------------------------------------------------

    def pending(self, campaign: str | None = None) -> int:
        """How many reports wait in the outbox."""
        return self._outbox.count(campaign)

    def pending_ids(self, campaign: str | None = None) -> set[str]:
        """Ids of the reports waiting in the outbox."""
        return self._outbox.report_ids(campaign)

    def flush(
        self, campaign: str | None = None, *, force: bool = False, deadline: float | None = None
    ) -> int:
        """Upload queued reports (of one campaign, or all); return how many were acknowledged.

        Never raises for the network or the collector's answers: what was not acknowledged stays
        queued, and :meth:`status` has the last error and when the next attempt is due. After a
        failed flush, a flush before that time returns 0 at once without the network (unless
        ``force``): exponential backoff with jitter, and at least the collector's
        ``Retry-After``. ``deadline`` (seconds; ``flush_deadline`` by default) bounds the whole
        flush, retries and waits included. Network errors, 408, 429 and 5xx are retried within
        it; other 4xx are not.
        """
        with self._flush_lock:
            if self._closed_client:
                raise RuntimeError("this TelemetryClient is closed")
            with self._status_lock:
                due = self._next_attempt
            if not force and due is not None and time.time() < due:
                return 0
            seconds = self.flush_deadline if deadline is None else deadline
            end = time.monotonic() + check_positive(seconds, "deadline")
            if self._own_session:
                set_deadline(self._session, end)
            try:
                if campaign is not None:
                    names = [campaign] if self._outbox.count(campaign) else []
                else:
                    names = self._outbox.campaigns()
                acknowledged = 0
                failure: tuple[str, Exception] | None = None
                for name in names:
                    try:
                        acknowledged += self._flush_campaign(name, end)
                    except UploadError as error:
                        acknowledged += error.acknowledged
                        failure = failure or (name, error)
                        if error.status is None or error.status in RETRY_STATUSES:
                            break  # the network, the deadline, or an overloaded collector
                    except (
                        CampaignVerificationError,
                        CampaignClosedError,
                        PolicyViolation,
                    ) as error:
                        # A changed, unverifiable or refused campaign: its reports stay queued
                        # (the app decides, e.g. accept_campaign_change); the others go on.
                        failure = failure or (name, error)
                self._settle_flush(failure)
                return acknowledged
            finally:
                if self._own_session:
                    set_deadline(self._session, None)

    def _settle_flush(self, failure: tuple[str, Exception] | None) -> None:
        """Schedule the next flush: now after a success, after a backoff after a failure."""
        with self._status_lock:
            if failure is None:
                self._failures = 0
                self._next_attempt = None
                self._fetch_blocked.clear()
                return
            name, error = failure
            self._failures += 1
            wait = self._backoff(self._failures)
            retry_after = getattr(error, "retry_after", None)
            if retry_after is not None:
                wait = max(wait, min(retry_after, BACKOFF_MAX))
            self._next_attempt = time.time() + wait
            self._note_error(name, error)
        logger.info(
            "flush of campaign %r failed (%s); the next attempt in %.3g s", name, error, wait
        )

    def _backoff(self, failures: int) -> float:
        """Seconds to wait after ``failures`` consecutive failed flushes: exponential, capped,
        with "equal jitter" (half fixed, half uniform) so devices do not retry in step."""
        ceiling = min(BACKOFF_MAX, BACKOFF_BASE * 2.0 ** min(failures - 1, 32))
        return ceiling / 2 + self._jitter.uniform(0.0, ceiling / 2)

    def _next_batch(
        self, name: str, batch_size: int, deadline: float, acknowledged: int
    ) -> tuple[list[QueuedReport], float]:
        """The next queued batch of campaign ``name`` (empty when none is left) and the
        seconds left for it; ``UploadError`` once the flush deadline has passed."""
        batch = self._outbox.batch(name, batch_size)
        remaining = deadline - time.monotonic()
        if batch and remaining <= 0:
            raise UploadError(
                f"upload to campaign {name!r} stopped: the flush deadline of "
                f"{self.flush_deadline:g} s passed; {self._outbox.count(name)} reports stay "
                "queued",
                acknowledged=acknowledged,
            )
        return batch, remaining

    def _flush_campaign(self, name: str, deadline: float) -> int:
        info = self.campaign(name)
        self._drop_other_configs(info)
        if isinstance(info, DapCampaign):
            return self._flush_dap(info, deadline)
        acknowledged = 0
        batch_size = self.batch_size
        refetched = False
        while True:
            batch, remaining = self._next_batch(name, batch_size, deadline, acknowledged)
            if not batch:
                return acknowledged
            try:
                response = self._post(info, batch, remaining)
            except requests.RequestException as error:
                raise UploadError(
                    f"upload to campaign {name!r} failed after retries: {error}",
                    acknowledged=acknowledged,
                    retry_after=retry_after_of(error),
                ) from error
            if response.status_code == 200:
                settled, deferred = self._settle(info, batch, response)
                acknowledged += settled
                if deferred:  # past the credential's quota: the rest waits for a later flush
                    return acknowledged
                continue
            problem = _problem(response)
            kind = (problem or {}).get("type")
            if response.status_code == 409 and kind == problem_type("stale-config"):
                if refetched:
                    raise UploadError(
                        f"campaign {name!r}: config still stale after refetching",
                        acknowledged=acknowledged,
                        status=409,
                        problem=problem,
                    )
                refetched = True
                refreshed = self.campaign(name, refresh=True)
                self._drop_other_configs(refreshed)
                if isinstance(refreshed, DapCampaign):  # now aggregated by a DAP pair
                    return acknowledged + self._flush_dap(refreshed, deadline)
                info = refreshed
                continue
            ended = {problem_type(r): r for r in ("campaign-closed", "campaign-expired")}
            if response.status_code == 410 and kind in ended:
                # Closed or expired for good: the queued reports can never be delivered. Drop
                # them, count them in status() and the privacy log, record nothing more for it,
                # and never retry.
                reason = ended[str(kind)]
                dropped = self._outbox.drop_campaign(name)
                self._ledger.note(
                    name, f"{reason} (said the collector); {dropped} queued reports dropped unsent"
                )
                with self._campaigns_lock:
                    self._closed[name] = reason
                    self._campaigns.pop(name, None)
                with self._status_lock:
                    self._dropped.setdefault(name, Counter())[reason] += dropped
                logger.warning("campaign %r: %s: dropped %d queued reports", name, reason, dropped)
                return acknowledged
            if response.status_code == 413 and batch_size > 1:
                batch_size = max(1, batch_size // 2)  # the collector's cap is lower: split
                continue
            raise UploadError(
                f"upload to campaign {name!r} refused: HTTP {response.status_code}: "
                f"{(problem or {}).get('detail', response.reason)}",
                acknowledged=acknowledged,
                status=response.status_code,
                problem=problem,
                retry_after=retry_after_seconds(response.headers.get("Retry-After")),
            )

    def _flush_dap(self, campaign: DapCampaign, deadline: float) -> int:
        """Upload a secure-aggregation campaign's queued reports to its Leader (docs/dap.md,
        "Upload and answers"): the same batches, deadline, retries and backoff as collector
        uploads; the report id is fixed, so a retry is refused ``report_replayed`` and counted
        once by the Leader."""
        name = campaign.name
        task_id = b64encode(campaign.task.task_id)
        url = f"{campaign.leader}tasks/{task_id}/reports"
        acknowledged = 0
        batch_size = self.batch_size
        while True:
            batch, remaining = self._next_batch(name, batch_size, deadline, acknowledged)
            if not batch:
                return acknowledged
            body = UploadRequest(
                tuple(
                    Report.decode(b64decode(json.loads(r.payload), "queued report")) for r in batch
                )
            ).encode()
            try:
                response = self._session.post(
                    url,
                    data=body,
                    headers={"Content-Type": UploadRequest.MEDIA_TYPE},
                    timeout=_within(self.timeout, remaining),
                )
            except requests.RequestException as error:
                raise UploadError(
                    f"upload to campaign {name!r} (Leader {campaign.leader}) failed after "
                    f"retries: {error}",
                    acknowledged=acknowledged,
                    retry_after=retry_after_of(error),
                ) from error
            if response.status_code == 200:
                settled, early = self._settle_dap(campaign, batch, response)
                acknowledged += settled
                if early:
                    return acknowledged  # the device's clock is ahead: a later flush retries
                continue
            if response.status_code == 413 and len(batch) > 1:
                batch_size = max(1, len(batch) // 2)  # the Leader's cap is lower: split
                continue
            problem = _problem(response)
            raise UploadError(
                f"upload to campaign {name!r} refused by the Leader: HTTP "
                f"{response.status_code}: {(problem or {}).get('detail', response.reason)}",
                acknowledged=acknowledged,
                status=response.status_code,
                problem=problem,
                retry_after=retry_after_seconds(response.headers.get("Retry-After")),
            )

    def _settle_dap(
        self, campaign: DapCampaign, batch: Sequence[QueuedReport], response: requests.Response
    ) -> tuple[int, int]:
        """Remove what the Leader's ``UploadErrors`` settles; ``(delivered, too_early)``.

        A report it does not list was stored; ``report_replayed`` was stored by an earlier
        upload (a retry); ``report_too_early`` stays queued; any other error can never be
        delivered: the report is dropped and counted as ``dap:<error>``."""
        try:
            errors = {s.id.hex(): s.error for s in UploadErrors.decode(response.content).status}
        except ValueError as error:
            raise UploadError(
                f"campaign {campaign.name!r}: unreadable UploadErrors from the Leader: {error}",
                status=200,
            ) from error
        ids = {r.report_id for r in batch}
        if not errors.keys() <= ids:
            raise UploadError(
                f"campaign {campaign.name!r}: the Leader's UploadErrors names reports not sent",
                status=200,
            )
        done: list[int] = []
        delivered = early = 0
        dropped: Counter[str] = Counter()
        for report in batch:
            refused = errors.get(report.report_id)
            if refused == ReportError.REPORT_TOO_EARLY:
                early += 1
                continue
            done.append(report.seq)
            if refused is None or refused == ReportError.REPORT_REPLAYED:
                delivered += 1
            else:
                dropped[f"dap:{refused.name.lower()}"] += 1
        self._outbox.remove(done)
        if dropped:
            with self._status_lock:
                self._dropped.setdefault(campaign.name, Counter()).update(dropped)
            logger.warning(
                "campaign %r: the Leader refused reports for good, dropped: %s",
                campaign.name,
                dict(dropped),
            )
        return delivered, early

    def _post(
        self, campaign: Campaign, batch: Sequence[QueuedReport], remaining: float
    ) -> requests.Response:
        # Payloads are queued as JSON text: the body is assembled without re-encoding them.
        body = (
            f'{{"config_id":{json.dumps(campaign.config_id)},"reports":['
            + ",".join(f'{{"id":"{r.report_id}","payload":{r.payload}}}' for r in batch)
            + "]}"
        )
        base, headers = self.base_url, {"Content-Type": "application/json"}
        if campaign.document.get("shuffle") is not None:
            if self.shuffler_url is None:
                raise UploadError(
                    f"campaign {campaign.name!r} is shuffled: give TelemetryClient a "
                    "shuffler_url (its reports never go to the collector directly)"
                )
            base, headers = self.shuffler_url, {**headers, **self._shuffler_headers}
        url = f"{base}/v1/campaigns/{urllib.parse.quote(campaign.name, safe='')}/reports"
        return self._session.post(
            url,
            data=body.encode("utf-8"),
            headers=headers,
            timeout=_within(self.timeout, remaining),
        )

    def _settle(
        self, campaign: Campaign, batch: Sequence[QueuedReport], response: requests.Response
    ) -> tuple[int, int]:
        """Remove what the collector answered for; ``(acknowledged, deferred)``: a shuffler
        that meters credentials defers the reports past the quota, which stay queued."""
        try:
            body = response.json()
            accepted, duplicate = int(body["accepted"]), int(body["duplicate"])
            rejected = {int(r["index"]): str(r.get("reason", "")) for r in body["rejected"]}
            deferred = {int(i) for i in body.get("deferred", [])}
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            raise UploadError(
                f"campaign {campaign.name!r}: unreadable upload response: {error}", status=200
            ) from error
        answered = accepted + duplicate + len(rejected) + len(deferred)
        if (
            answered != len(batch)
            or not all(0 <= i < len(batch) for i in rejected.keys() | deferred)
            or rejected.keys() & deferred
        ):
            raise UploadError(
                f"campaign {campaign.name!r}: the response accounts for {answered} reports, "
                f"not {len(batch)}",
                status=200,
            )
        for index, reason in sorted(rejected.items()):
            logger.warning(
                "campaign %r: report %s rejected and dropped: %s",
                campaign.name,
                batch[index].report_id,
                reason,
            )
        self._outbox.remove([r.seq for i, r in enumerate(batch) if i not in deferred])
        return accepted + duplicate, len(deferred)

    def _drop_other_configs(self, campaign: AnyCampaign) -> None:
        dropped = self._outbox.drop_other_configs(campaign.name, campaign.config_id)
        if dropped:
            logger.warning(
                "campaign %r: dropped %d queued reports made under another config (now %s); "
                "they cannot be uploaded under the new config or re-randomized",
                campaign.name,
                dropped,
                campaign.config_id,
            )


def _clipped_count(mechanism: Mechanism, numbers: npt.NDArray[Any]) -> int:
    """How many numbers (or vectors) lie outside the mechanism's input set, which it clips them
    to: the L2 ball of radius ``clip_norm`` (vector Gaussian), else the box [lower, upper]."""
    clip_norm = getattr(mechanism, "clip_norm", None)
    if numbers.ndim == 2 and clip_norm is not None:
        return int(np.count_nonzero(np.linalg.norm(numbers, axis=1) > clip_norm))
    lower, upper = getattr(mechanism, "lower", None), getattr(mechanism, "upper", None)
    if lower is None or upper is None:
        return 0
    outside = (numbers < lower) | (numbers > upper)
    if outside.ndim == 2:
        outside = outside.any(axis=1)
    return int(np.count_nonzero(outside))


def _reserved_count(mechanism: Any, encoded: Any) -> int:
    """How many values a string mechanism of ``max_length`` (cms, hcms, pem, sfp) randomized as
    its reserved symbol (0 for the others: rappor takes any string)."""
    if getattr(mechanism, "value_kind", None) != "string" or not hasattr(mechanism, "max_length"):
        return 0
    return count_reserved(encoded, mechanism.max_length, getattr(mechanism, "alphabet", None))


def _seal_all(campaign: Campaign, payloads: Sequence[Any]) -> list[Any]:
    """Each payload sealed to the public key the shuffled campaign's document carries."""
    key = campaign.document.get("public_key")
    if not isinstance(key, dict) or not {"key_id", "key"} <= key.keys():
        raise CampaignVerificationError(
            f"campaign {campaign.name!r} is shuffled but its document has no public_key"
        )
    # The nonces come from the OS CSPRNG, as report ids do, never from an injected seeded
    # generator: two simulated devices seeded alike would otherwise share nonces, and the
    # collector would store only one of their reports.
    return seal_payloads(
        payloads,
        public_key=key["key"],
        key_id=key["key_id"],
        campaign=campaign.name,
        config_id=campaign.config_id,
        mechanism=campaign.mechanism,
    )


def _problem(response: requests.Response) -> dict[str, Any] | None:
    """The RFC 9457 problem document of an error response, if it has one."""
    if not response.headers.get("Content-Type", "").startswith("application/problem+json"):
        return None
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


_TOKEN = re.compile(r"[!-~]{1,256}")
"""A credential token as it may go into a header: printable ASCII without spaces."""

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def _check_base_url(base_url: Any, *, allow_insecure_http: bool) -> str:
    """An https URL, or http to a loopback address (or anywhere, when the app opts in)."""
    if not isinstance(base_url, str):
        raise ValueError(f"base_url must be an http(s) URL; got a {type(base_url).__name__}")
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"base_url must be an http(s) URL with a host; got {base_url!r}")
    host = parts.hostname
    loopback = host in LOOPBACK_HOSTS or host.startswith("127.")
    if parts.scheme == "http" and not loopback and not allow_insecure_http:
        raise ValueError(
            f"base_url {base_url!r} is plain http to a host that is not loopback: reports and "
            "campaign documents would travel unauthenticated. Use https, or pass "
            "allow_insecure_http=True"
        )
    return base_url.rstrip("/")


def _read_bounded(response: requests.Response, limit: int) -> bytes | None:
    """The body of a streamed response, or ``None`` when it exceeds ``limit`` bytes."""
    declared = response.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(chunk_size=65536):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _problem_of(response: requests.Response, body: bytes) -> dict[str, Any] | None:
    """The RFC 9457 problem document in an error response's body, if it has one."""
    if not response.headers.get("Content-Type", "").startswith("application/problem+json"):
        return None
    try:
        document = json.loads(body)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def memo_scope(campaign: str, mechanism: Mechanism) -> str:
    """What a campaign's permanent responses are keyed by: its name and mechanism parameters.

    Not the whole ``config_id``: a change of ``min_batch_size`` or of the budget does not change
    what a permanent response is, and must not buy fresh ones. The name keeps two campaigns with
    the same parameters from sharing permanent responses (which would link them).
    """
    return config_id({"campaign": campaign, "mechanism": mechanism.to_config()})


def _within(timeout: float | tuple[float, float], remaining: float) -> float | tuple[float, float]:
    """A requests timeout no longer than ``remaining`` seconds per socket wait."""
    bound = max(remaining, 0.001)
    if isinstance(timeout, tuple):
        return (min(timeout[0], bound), min(timeout[1], bound))
    return min(timeout, bound)
