"""Validation of an upload batch against its campaign's mechanism (Flask-free).

Request-level problems (not an object, wrong field types, too many reports) are the web layer's
400/413; this module handles report-level ones, as the IETF DAP upload rules do: every report is
judged on its own, and the answer names each rejected report by its index with a reason code
(``malformed_report``, ``invalid_id``, ``invalid_payload``; for a shuffler's sealed reports
also ``invalid_envelope`` and ``misdirected_envelope``) and a readable reason.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from client_sdk.mechanisms import Mechanism, WireFormatError
from client_sdk.protocol import is_report_id
from client_sdk.sealing import SealedReport, plaintext_reader

REJECTION_CODES = (
    "malformed_report",
    "invalid_id",
    "invalid_payload",
    "invalid_envelope",
    "misdirected_envelope",
)
_REPORT_FIELDS = {"id", "payload"}


@dataclasses.dataclass(frozen=True)
class Rejection:
    """A report of the batch that is not stored: its index, a reason code and the reason."""

    index: int
    code: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "code": self.code, "reason": self.reason}


@dataclasses.dataclass(frozen=True)
class ValidatedBatch:
    """Rows ready for storage ``(report_id, compact payload JSON)`` and the rejections; for
    sealed reports, ``nonces`` holds each row's nonce (``client_sdk.sealing``)."""

    rows: list[tuple[str, str]]
    rejections: list[Rejection]
    nonces: list[bytes] | None = None

    def rejected_by_code(self) -> Counter[str]:
        return Counter(r.code for r in self.rejections)


class MisdirectedEnvelope(ValueError):
    """A sealed report made for another campaign, or under another config of this one."""


def open_report(plaintext: bytes, *, campaign: str, config_id: str) -> SealedReport:
    """The fields of an opened envelope of ``campaign`` (``client_sdk.sealing.plaintext_reader``);
    :class:`MisdirectedEnvelope` when it binds another campaign or config id, ``ValueError``
    for anything else wrong."""
    report = plaintext_reader(campaign, config_id)(plaintext)
    if report.campaign != campaign:
        raise MisdirectedEnvelope(
            f"the envelope was sealed for campaign {_short(report.campaign)}, not {campaign!r}"
        )
    if report.config_id != config_id:
        raise MisdirectedEnvelope(
            f"the envelope was sealed under config_id {_short(report.config_id)}, not the "
            f"campaign's {config_id!r}"
        )
    return report


def validate_batch(
    mechanism: Mechanism,
    reports: Sequence[Any],
    *,
    texts: Sequence[str] | None = None,
    nonces: Sequence[str] | None = None,
) -> ValidatedBatch:
    """Check every report's shape, id and payload (``mechanism.parse_wire``).

    ``texts``: the JSON text each report's payload was parsed from, when the caller has it
    (the shuffler's batches: each opened plaintext); it saves encoding each payload again
    (:func:`_compact_all`). ``nonces``: each report's nonce (hex), kept with its row."""
    rejections: list[Rejection] = []
    candidates: list[tuple[int, str]] = []
    payloads: list[Any] = []
    for index, entry in enumerate(reports):
        if not isinstance(entry, dict):
            rejections.append(
                Rejection(
                    index,
                    "malformed_report",
                    f"a report must be an object with 'id' and 'payload'; got "
                    f"{type(entry).__name__}",
                )
            )
        elif entry.keys() != _REPORT_FIELDS:
            missing = sorted(_REPORT_FIELDS - entry.keys())
            unknown = sorted(entry.keys() - _REPORT_FIELDS)
            parts = [f"missing {', '.join(missing)}"] if missing else []
            parts += [f"unknown field(s) {', '.join(unknown)[:200]}"] if unknown else []
            rejections.append(
                Rejection(
                    index,
                    "malformed_report",
                    "a report has 'id' and 'payload' only: " + "; ".join(parts),
                )
            )
        elif not is_report_id(entry["id"]):
            rejections.append(
                Rejection(
                    index,
                    "invalid_id",
                    f"id must be 32 lowercase hex characters; got {_short(entry['id'])}",
                )
            )
        else:
            candidates.append((index, entry["id"]))
            payloads.append(entry["payload"])

    errors = _parse_wire_errors(mechanism, payloads)
    kept = [p for p, _ in enumerate(candidates) if p not in errors]
    encoded = _compact_all(
        [payloads[p] for p in kept],
        None if texts is None else [texts[candidates[p][0]] for p in kept],
    )
    rows = [(candidates[p][1], text) for p, text in zip(kept, encoded, strict=True)]
    kept_nonces = (
        None if nonces is None else [bytes.fromhex(nonces[candidates[p][0]]) for p in kept]
    )
    for position, (index, _) in enumerate(candidates):
        reason = errors.get(position)
        if reason is not None:
            rejections.append(Rejection(index, "invalid_payload", _bounded(reason)))
    rejections.sort(key=lambda r: r.index)
    return ValidatedBatch(rows=rows, rejections=rejections, nonces=kept_nonces)


def _parse_wire_errors(mechanism: Mechanism, payloads: list[Any]) -> dict[int, str]:
    """Position -> reason for every payload ``parse_wire`` refuses.

    A mechanism's parser is meant to return errors, not raise; if one raises anyway on some
    hostile input, the payloads are re-checked one by one so a single bad report can never turn
    the whole upload into a 500.
    """
    try:
        _, errors = mechanism.parse_wire(payloads)
        return {error.index: error.reason for error in errors}
    except Exception:
        reasons: dict[int, str] = {}
        for position, payload in enumerate(payloads):
            try:
                _, errors = mechanism.parse_wire([payload])
            except Exception as error:  # a parser bug: reject this payload, keep the rest
                reasons[position] = f"payload does not decode ({type(error).__name__})"
                continue
            if errors:
                reasons[position] = errors[0].reason
        return reasons


# One encoder for every payload: json.dumps with non-default options builds a new encoder per
# call, which costs more than encoding a small payload.
_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def _compact_all(payloads: list[Any], texts: list[str] | None) -> list[str]:
    """Each payload's compact JSON. Given ``texts`` (each one JSON value, the text its payload
    was parsed from), they are the answer when the list's one encoding is exactly those texts
    joined by commas in brackets: an array's elements are found uniquely in its text, so each
    text is then its payload's own compact encoding."""
    if texts is not None:
        try:
            if _compact(payloads) == "[" + ",".join(texts) + "]":
                return list(texts)
        except (ValueError, RecursionError):  # NaN, or one level too deep: one by one below
            pass
    return [_compact(p) for p in payloads]


def _short(value: Any) -> str:
    """A bounded description of an untrusted value (never a deep or huge repr)."""
    if isinstance(value, str):
        text = json.dumps(value[:60], ensure_ascii=True)
        return text if len(value) <= 60 else text + "..."
    if value is None or isinstance(value, (bool, int, float)):
        text = json.dumps(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return f"a JSON {'array' if isinstance(value, list) else 'object'}"


def _bounded(reason: str, limit: int = 300) -> str:
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."


__all__ = [
    "REJECTION_CODES",
    "MisdirectedEnvelope",
    "Rejection",
    "ValidatedBatch",
    "WireFormatError",
    "open_report",
    "validate_batch",
]
