"""VDAF's ping-pong framing inside DAP's VerifyInit/VerifyResp/VerifyContinue payloads, byte
for byte against libprio-rs and Janus.

Golden hex: tests/client_sdk/dap/ping_pong_messages.json (its "source" names the files and
commits: libprio-rs src/topology/ping_pong.rs at v0.18.1-alpha.3, the prio Janus pins, and the
payloads inside Janus's messages/src/tests/aggregation.rs at 4ab28a36). Both directions: the
fields encode to the fixture's bytes, and the bytes decode to the fields. Janus's framing agrees
with the DAP-18 and VDAF texts (a type byte, then u32-prefixed fields; the whole message is the
u32-prefixed ``payload``), so no mapping is needed here, unlike three of Janus's job messages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from client_sdk.dap import messages as m
from client_sdk.dap.codec import DapDecodeError, DapEncodeError

FIXTURES = json.loads((Path(__file__).parent / "ping_pong_messages.json").read_text())["messages"]
JANUS = json.loads((Path(__file__).parent / "janus_messages.json").read_text())["messages"]
TYPES = {
    "initialize": m.PingPongType.INITIALIZE,
    "continue": m.PingPongType.CONTINUE,
    "finish": m.PingPongType.FINISH,
}


def _build(case: dict[str, Any]) -> m.PingPongMessage:
    message, share = bytes.fromhex(case["verifier_message"]), bytes.fromhex(case["verifier_share"])
    kind = TYPES[case["type"]]
    if kind == m.PingPongType.INITIALIZE:
        return m.PingPongMessage.initialize(share)
    if kind == m.PingPongType.CONTINUE:
        return m.PingPongMessage.continue_(message, share)
    return m.PingPongMessage.finish(message)


@pytest.mark.parametrize(
    "case", FIXTURES, ids=[f"{c['from']}-{c['test'].split('::')[1]}-{c['type']}" for c in FIXTURES]
)
def test_ping_pong_golden_both_directions(case: dict[str, Any]) -> None:
    data = bytes.fromhex(case["hex"])
    assert _build(case).encode() == data  # ours -> theirs
    decoded = m.PingPongMessage.decode(data)  # theirs -> ours
    assert decoded == _build(case)
    assert decoded.type == TYPES[case["type"]]
    assert decoded.encode() == data


def test_janus_job_messages_carry_these_payloads() -> None:
    """The Janus fixtures' ping-pong bytes are exactly the payloads of its VerifyInit and
    VerifyResp fixtures (so the framing is checked inside the DAP messages too)."""
    janus = {c["hex"] for c in FIXTURES if c["from"] == "janus"}
    inits = [m.VerifyInit.decode(bytes.fromhex(e["hex"])).payload for e in JANUS["VerifyInit"]]
    resps = [m.VerifyResp.decode(bytes.fromhex(e["hex"])) for e in JANUS["VerifyResp"]]
    payloads = inits + [r.payload for r in resps if r.verify_resp_type == m.VerifyRespType.CONTINUE]
    assert len(payloads) == 3 and {p.hex() for p in payloads} <= janus
    for payload in payloads:
        assert m.PingPongMessage.decode(payload).encode() == payload


def test_aggregators_frame_prio3_as_initialize_then_finish() -> None:
    """What the Leader puts in a VerifyInit and the Helper answers: Prio3 is one round."""
    from collector.dap.aggregator import PING_FINISH, PING_INITIALIZE, _ping, _unping

    share, message = b"verifier share", b"verifier message"
    initialize, finish = FIXTURES[0], FIXTURES[2]
    assert _ping(PING_INITIALIZE, share).hex() == initialize["hex"]
    assert _ping(PING_FINISH, message).hex() == finish["hex"]
    assert _unping(bytes.fromhex(initialize["hex"]), PING_INITIALIZE) == share
    assert _unping(bytes.fromhex(finish["hex"]), PING_FINISH) == message
    with pytest.raises(DapDecodeError, match="type = INITIALIZE; expected FINISH"):
        _unping(bytes.fromhex(initialize["hex"]), PING_FINISH)


@pytest.mark.parametrize(
    ("hex_", "match"),
    [
        ("03", r"PingPongMessage\.type: unknown PingPongType value 3"),
        ("00000000", r"PingPongMessage\.verifier_share \(length\): needs 4 bytes"),
        ("0100000000", r"PingPongMessage\.verifier_share \(length\)"),
        ("020000000000", "1 trailing bytes"),
        ("", r"PingPongMessage\.type: needs 1 bytes"),
    ],
)
def test_ping_pong_refusals_name_the_field(hex_: str, match: str) -> None:
    with pytest.raises(DapDecodeError, match=match):
        m.PingPongMessage.decode(bytes.fromhex(hex_))


def test_ping_pong_fields_fit_their_type() -> None:
    with pytest.raises(DapEncodeError, match="initialize carries no verifier_message"):
        m.PingPongMessage(m.PingPongType.INITIALIZE, b"x", b"y")
    with pytest.raises(DapEncodeError, match="finish carries no verifier_share"):
        m.PingPongMessage(m.PingPongType.FINISH, b"x", b"y")
