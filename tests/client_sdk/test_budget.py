"""The on-device privacy ledger (client_sdk/budget.py): refusals, persistence, the clock,
period renewal, memoized distinct-value accounting, the user-visible log, concurrency."""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from client_sdk.budget import (
    LEDGER_FILE,
    BudgetExceededError,
    BudgetLedger,
    BudgetPolicy,
    Charge,
)

DAY = 86_400
POLICY = {"epsilon_per_report": 1.0, "reports_per_period": 3, "period_seconds": DAY}
KEY_A = "a" * 64
KEY_B = "b" * 64


class Clock:
    """A settable clock."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(100 * DAY + 3600.0)  # one hour into a period


@pytest.fixture
def ledger(tmp_path: Path, clock: Clock) -> Iterator[BudgetLedger]:
    with BudgetLedger(tmp_path, clock=clock) as opened:
        yield opened


def rows(ledger: BudgetLedger) -> int:
    return len(ledger.history())


# ---- policy ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "match"),
    [
        ({"reports_per_period": 1, "period_seconds": 60}, "missing epsilon_per_report"),
        (POLICY | {"burst": 2}, "unknown field"),
        (POLICY | {"epsilon_per_report": 0}, "epsilon_per_report"),
        (POLICY | {"epsilon_per_report": math.inf}, "epsilon_per_report"),
        (POLICY | {"epsilon_per_report": "1"}, "epsilon_per_report"),
        (POLICY | {"reports_per_period": 0}, "reports_per_period"),
        (POLICY | {"reports_per_period": 2.0}, "reports_per_period"),
        (POLICY | {"period_seconds": True}, "period_seconds"),
        ([1, 2, 3], "JSON object"),
    ],
)
def test_bad_policies_are_refused(ledger: BudgetLedger, policy: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ledger.authorize("c", policy, epsilon=0.5)
    assert rows(ledger) == 0


def test_policy_round_trips() -> None:
    policy = BudgetPolicy.from_dict(POLICY)
    assert policy.to_dict() == POLICY
    assert policy.epsilon_per_period == 3.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"epsilon": 0.5, "memo_key": "short"}, "memo_key"),
        ({"epsilon": 0.5, "report": {"x": math.nan}}, "JSON-safe"),
        ({"epsilon": 0.5, "report": object()}, "JSON-safe"),
    ],
)
def test_bad_arguments_record_nothing(ledger: BudgetLedger, kwargs: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ledger.authorize("c", POLICY, **kwargs)
    assert rows(ledger) == 0


# ---- spending and refusals ----------------------------------------------------------------


def test_spends_up_to_the_report_cap_then_refuses(ledger: BudgetLedger, clock: Clock) -> None:
    receipts = [ledger.authorize("daily", POLICY, epsilon=0.5) for _ in range(3)]
    assert [r.charges_in_period for r in receipts] == [1, 2, 3]
    assert receipts[-1].spent_in_period == pytest.approx(1.5)
    assert receipts[-1].renews_at == 101 * DAY
    with pytest.raises(BudgetExceededError) as caught:
        ledger.authorize("daily", POLICY, epsilon=0.5)
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.campaign == "daily"
    assert error.spent == pytest.approx(1.5) and error.limit == 3.0
    assert error.renews_at == 101 * DAY
    message = str(error)
    assert "'daily'" in message and "1.5 of 3" in message and "1970-04-12T00:00Z" in message
    assert rows(ledger) == 3  # the refusal recorded nothing
    assert ledger.status("daily", POLICY).charges_in_period == 3


def test_refuses_when_the_epsilon_total_would_exceed(ledger: BudgetLedger) -> None:
    policy = {"epsilon_per_report": 1.0, "reports_per_period": 3, "period_seconds": DAY}
    ledger.authorize("c", policy, epsilon=1.0)
    ledger.authorize("c", policy, epsilon=1.0)
    with pytest.raises(BudgetExceededError, match=r"would cost 0\.5 more") as caught:
        # Under a policy of 2/3 per report (budget 2.0 a period), 2.0 is already spent.
        ledger.authorize("c", {**policy, "epsilon_per_report": 2 / 3}, epsilon=0.5)
    assert caught.value.spent == pytest.approx(2.0)
    assert rows(ledger) == 2


def test_many_small_reports_fill_the_budget_exactly(ledger: BudgetLedger) -> None:
    policy = {"epsilon_per_report": 0.1, "reports_per_period": 10, "period_seconds": DAY}
    for _ in range(10):
        ledger.authorize("c", policy, epsilon=0.1)  # 0.1 * 10 in floats: must fit
    assert ledger.status("c", policy).spent_in_period == pytest.approx(1.0)


def test_sum_cap_is_separate_from_count_cap(ledger: BudgetLedger) -> None:
    policy = {"epsilon_per_report": 1.0, "reports_per_period": 3, "period_seconds": DAY}
    for _ in range(2):
        ledger.authorize("c", policy, epsilon=1.0)
    ledger.authorize("c", policy, epsilon=0.999)
    # 2.999 spent, 3 charges: the count cap refuses even a tiny report.
    with pytest.raises(BudgetExceededError, match="3 of 3 charged reports"):
        ledger.authorize("c", policy, epsilon=0.001)
    # A larger cap on the count leaves only the epsilon total in the way.
    roomy = policy | {"reports_per_period": 4}
    with pytest.raises(BudgetExceededError, match=r"would cost 0\.5 more"):
        ledger.authorize("c", {**roomy, "epsilon_per_report": 0.75}, epsilon=0.5)
    assert rows(ledger) == 3


def test_a_report_above_the_per_report_epsilon_never_fits(ledger: BudgetLedger) -> None:
    with pytest.raises(BudgetExceededError, match="exceeds the policy's epsilon_per_report") as e:
        ledger.authorize("c", POLICY, epsilon=1.5)
    assert e.value.renews_at is None and "does not help" in str(e.value)
    assert rows(ledger) == 0


def test_campaigns_have_separate_budgets(ledger: BudgetLedger) -> None:
    for _ in range(3):
        ledger.authorize("a", POLICY, epsilon=1.0)
    ledger.authorize("b", POLICY, epsilon=1.0)
    with pytest.raises(BudgetExceededError, match="'a'"):
        ledger.authorize("a", POLICY, epsilon=1.0)


def test_batches_are_all_or_nothing(ledger: BudgetLedger) -> None:
    batch = [Charge(0.5, report=i) for i in range(4)]  # the fourth exceeds the count cap
    with pytest.raises(BudgetExceededError, match="3 of 3"):
        ledger.authorize_many("c", POLICY, batch)
    assert rows(ledger) == 0 and ledger.status("c", POLICY).charges_in_period == 0
    receipts = ledger.authorize_many("c", POLICY, batch[:3])
    assert [r.charges_in_period for r in receipts] == [1, 2, 3]
    assert [e.report for e in ledger.history()] == [0, 1, 2]


def test_a_batch_pays_once_per_new_memoized_value(ledger: BudgetLedger) -> None:
    charges = [Charge(2.0, KEY_A, "r1"), Charge(2.0, KEY_A, "r2"), Charge(2.0, KEY_A, "r3")]
    receipts = ledger.authorize_many("m", POLICY, charges)
    assert [r.epsilon_charged for r in receipts] == [2.0, 0.0, 0.0]
    with pytest.raises(BudgetExceededError):
        ledger.authorize_many("m", POLICY, [Charge(2.0, KEY_A), Charge(2.0, KEY_B)])
    assert rows(ledger) == 3  # the repeat of A in the refused batch was not recorded either


# ---- time --------------------------------------------------------------------------------------


def test_period_renews(ledger: BudgetLedger, clock: Clock) -> None:
    for _ in range(3):
        ledger.authorize("c", POLICY, epsilon=1.0)
    clock.now = 101 * DAY - 1
    with pytest.raises(BudgetExceededError):
        ledger.authorize("c", POLICY, epsilon=1.0)
    clock.now = 101 * DAY
    receipt = ledger.authorize("c", POLICY, epsilon=1.0)
    assert receipt.charges_in_period == 1 and receipt.period_start == 101 * DAY
    assert ledger.status("c", POLICY).lifetime_epsilon == pytest.approx(4.0)


def test_clock_going_backwards_never_renews(ledger: BudgetLedger, clock: Clock) -> None:
    clock.now = 101 * DAY - 60  # last minute of the period
    for _ in range(3):
        ledger.authorize("c", POLICY, epsilon=1.0)
    clock.now = 50 * DAY  # set back by 50 days: earlier periods must not count as fresh
    with pytest.raises(BudgetExceededError) as caught:
        ledger.authorize("c", POLICY, epsilon=1.0)
    assert caught.value.renews_at == 101 * DAY
    status = ledger.status("c", POLICY)
    assert status.period_start == 100 * DAY and status.charges_in_period == 3
    clock.now = 101 * DAY + 5  # real time passes the stored time: the next period starts
    assert ledger.authorize("c", POLICY, epsilon=1.0).period_start == 101 * DAY


def test_time_before_the_last_seen_counts_as_the_last_seen(
    ledger: BudgetLedger, clock: Clock
) -> None:
    clock.now = 100 * DAY + 7200
    ledger.authorize("c", POLICY, epsilon=1.0)
    clock.now = 100 * DAY + 10  # back, within the period
    ledger.authorize("c", POLICY, epsilon=1.0)
    hours = [entry.hour for entry in ledger.history()]
    assert hours == ["1970-04-11T02:00Z", "1970-04-11T02:00Z"]


def test_ledger_survives_a_restart(tmp_path: Path, clock: Clock) -> None:
    clock.now = 101 * DAY - 60
    with BudgetLedger(tmp_path, clock=clock) as ledger:
        for _ in range(3):
            ledger.authorize("c", POLICY, epsilon=1.0)
        ledger.authorize("m", POLICY, epsilon=2.0, memo_key=KEY_A)
    clock.now = 10.0  # the device rebooted with a broken clock
    with BudgetLedger(tmp_path, clock=clock) as reopened:
        assert reopened.status("c", POLICY).period_start == 100 * DAY  # last seen, persisted
        with pytest.raises(BudgetExceededError):
            reopened.authorize("c", POLICY, epsilon=1.0)
        assert reopened.authorize("m", POLICY, epsilon=2.0, memo_key=KEY_A).memoized_repeat
        assert len(reopened.history()) == 5
    connection = sqlite3.connect(tmp_path / LEDGER_FILE)
    try:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        connection.close()


# ---- memoized accounting -----------------------------------------------------------------------


def test_memoized_values_are_charged_once_each(ledger: BudgetLedger, clock: Clock) -> None:
    policy = {"epsilon_per_report": 1.0, "reports_per_period": 4, "period_seconds": DAY}
    first = ledger.authorize("m", policy, epsilon=2.5, memo_key=KEY_A)  # above per-report: ok
    assert first.epsilon_charged == 2.5 and not first.memoized_repeat
    for _ in range(20):  # the same value again and again: free, and never refused
        again = ledger.authorize("m", policy, epsilon=2.5, memo_key=KEY_A)
        assert again.epsilon_charged == 0.0 and again.memoized_repeat
    with pytest.raises(BudgetExceededError, match=r"would cost 2\.5 more"):
        ledger.authorize("m", policy, epsilon=2.5, memo_key=KEY_B)  # 5.0 > 4.0
    clock.now += DAY
    assert not ledger.authorize("m", policy, epsilon=2.5, memo_key=KEY_B).memoized_repeat
    assert ledger.authorize("m", policy, epsilon=2.5, memo_key=KEY_A).memoized_repeat
    status = ledger.status("m", policy)
    assert status.distinct_memoized_values == 2
    assert status.lifetime_epsilon == pytest.approx(5.0)
    # Memo keys are per campaign: another campaign pays for the same key.
    assert not ledger.authorize("n", policy, epsilon=2.5, memo_key=KEY_A).memoized_repeat


def test_a_memoized_value_above_a_whole_period_never_fits(ledger: BudgetLedger) -> None:
    with pytest.raises(BudgetExceededError, match="more than a whole period") as caught:
        ledger.authorize("m", POLICY, epsilon=3.5, memo_key=KEY_A)
    assert caught.value.renews_at is None
    assert ledger.status("m", POLICY).distinct_memoized_values == 0


# ---- the log -----------------------------------------------------------------------------------


def test_history_shows_reports_and_costs_but_no_value_or_key(tmp_path: Path, clock: Clock) -> None:
    """The flow of a memoized campaign: the ledger sees the randomized payload, epsilon_inf and
    an HMAC memo key, never the value; the log shows the payloads and costs, never the key."""
    import numpy as np

    from client_sdk import mechanism_from_config
    from client_sdk.mechanisms.memoized_oracle import Memoized
    from client_sdk.secrets_store import DeviceKeys, load_or_create_device_secret

    secret = load_or_create_device_secret(tmp_path)
    m = mechanism_from_config(
        {"mechanism": "grr", "epsilon": 1.0, "k": 64, "longitudinal": {"epsilon_permanent": 2.0}}
    )
    assert isinstance(m, Memoized)
    label, value = "tabby-cat", 37  # the app's raw value and its index
    policy = {"epsilon_per_report": 1.0, "reports_per_period": 2, "period_seconds": DAY}
    sent = []
    with BudgetLedger(tmp_path, clock=clock) as ledger:
        (key,) = m.memo_keys([value], permanent=DeviceKeys(secret, "cfg"))
        rng = np.random.default_rng(1)
        for _ in range(3):
            payload = m.to_wire(m.perturb([value], rng=rng, permanent=DeviceKeys(secret, "cfg")))[0]
            ledger.authorize("cats", policy, epsilon=m.epsilon_inf, memo_key=key, report=payload)
            sent.append(payload)
        entries = ledger.history()
        assert ledger.history(limit=1) == entries[-1:]
        assert ledger.history("other") == []
    assert [e.report for e in entries] == sent
    assert [e.epsilon_charged for e in entries] == [2.0, 0.0, 0.0]
    assert [e.memoized_repeat for e in entries] == [False, True, True]
    assert {e.campaign for e in entries} == {"cats"}
    assert key not in repr(entries)
    assert key not in {str(value), f"{value:x}"} and len(key) == 64
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith(LEDGER_FILE))
    assert label.encode() not in stored
    connection = sqlite3.connect(tmp_path / LEDGER_FILE)
    try:
        columns = {row[1] for row in connection.execute("PRAGMA table_info(spends)")}
    finally:
        connection.close()
    # memo_key is the ledger's HMAC name of a memoized draw (as in the memo_keys table), mac the
    # seal's chain: neither is the value.
    assert columns == {
        "id",
        "campaign",
        "at",
        "epsilon",
        "charged",
        "memoized",
        "report",
        "memo_key",
        "event",
        "mac",
    }


# ---- concurrency -------------------------------------------------------------------------------


def test_concurrent_spenders_never_overspend(tmp_path: Path, clock: Clock) -> None:
    policy = {"epsilon_per_report": 1.0, "reports_per_period": 7, "period_seconds": DAY}
    ledgers = [BudgetLedger(tmp_path, clock=clock) for _ in range(2)]  # two connections
    outcomes: list[bool] = []
    lock = threading.Lock()

    def spend(index: int) -> None:
        try:
            ledgers[index % 2].authorize("c", policy, epsilon=1.0, report=index)
            ok = True
        except BudgetExceededError:
            ok = False
        with lock:
            outcomes.append(ok)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(spend, range(40)))
    assert outcomes.count(True) == 7 and len(outcomes) == 40
    assert len(ledgers[0].history()) == 7
    for opened in ledgers:
        opened.close()
