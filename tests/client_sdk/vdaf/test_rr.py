"""Randomized response inside Prio3 (client_sdk.vdaf.rr): the privacy is the unary randomizer's,
checked exactly as the other oracles are; the report fed to Prio3 follows the declared channel;
Prio3's aggregate equals the randomized reports' support counts and the estimate is unbiased."""

from __future__ import annotations

import random
from typing import Any, cast

import numpy as np
import pytest

from client_sdk.mechanisms.unary import OUE, SUE
from client_sdk.vdaf import VdafError
from client_sdk.vdaf.batch import verify_init_batch
from client_sdk.vdaf.rr import Prio3UnaryRR
from tests import stats

CTX = b"rr test"


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("cls", [SUE, OUE])
def test_the_privacy_claim_is_the_randomizers_exactly(cls: type, epsilon: float) -> None:
    rr = Prio3UnaryRR(cls(epsilon=epsilon, k=6))
    stats.assert_exact_privacy(rr.mechanism)
    assert rr.epsilon == rr.mechanism.privacy_epsilon
    assert rr.mechanism.implemented_epsilon() <= epsilon * (1 + 1e-9)


@pytest.mark.parametrize("cls", [SUE, OUE])
def test_the_prio3_measurement_follows_the_declared_channel(cls: type) -> None:
    rr = Prio3UnaryRR(cls(epsilon=1.0, k=4))
    (matrix,) = list(rr.mechanism.channel_matrices())
    rng = np.random.default_rng(17)
    for x in range(4):
        index = [
            sum(int(b) << i for i, b in enumerate(rr.randomize(x, rng=rng))) for _ in range(2000)
        ]
        observed = np.bincount(index, minlength=16)
        stats.assert_chi_square(observed, matrix[x], what=f"Prio3 measurements for input {x}")


def test_prio3_returns_the_support_counts_and_the_estimate_is_unbiased() -> None:
    rr = Prio3UnaryRR(OUE(epsilon=1.0, k=12))
    vdaf = rr.vdaf
    values = stats.skewed_population(12, 200)
    rng = np.random.default_rng(5)
    seeds = random.Random(5)
    key = seeds.randbytes(32)
    nonces: list[Any] = []
    publics: list[Any] = []
    inputs: list[list[Any]] = [[], []]
    vectors: list[Any] = []
    for v in values:
        nonce = seeds.randbytes(16)
        bits = rr.randomize(int(v), rng=rng)
        public, shares = vdaf.shard(CTX, bits, nonce, seeds.randbytes(vdaf.RAND_SIZE))
        vectors.append(bits)
        nonces.append(nonce)
        publics.append(vdaf.encode_public_share(public))
        for j in range(2):
            inputs[j].append(vdaf.encode_input_share(shares[j]))
    batches = [verify_init_batch(vdaf, key, CTX, j, nonces, publics, inputs[j]) for j in range(2)]
    for i in range(len(values)):
        msg = vdaf.verifier_shares_to_message(
            CTX, None, [batches[0].verifier_shares[i], batches[1].verifier_shares[i]]
        )
        for j in range(2):
            vdaf.verify_next(CTX, batches[j].states()[i], msg)
    aggs = [b.aggregate([True] * len(values)) for b in batches]
    result = vdaf.unshard(None, aggs, len(values))
    assert result == np.asarray(vectors, dtype=np.int64).sum(axis=0).tolist()
    truth = np.bincount(values, minlength=12) / len(values)
    estimate = rr.estimate(result, len(values))
    stats.assert_within_z(
        estimate, truth, np.sqrt(rr.variance(len(values), truth)), what="Prio3+OUE estimate"
    )


def test_a_vector_that_is_no_randomizer_output_is_rejected() -> None:
    """A malicious device sharding a count of 2 (not a possible unary-encoding output)."""
    rr = Prio3UnaryRR(SUE(epsilon=1.0, k=8))
    vdaf = rr.vdaf
    valid = vdaf.flp.valid
    meas = [0, 2, 0, 0, 1, 0, 0, 0]
    # The weight encoding claims the true sum (3), so only the range check can catch it.
    from client_sdk.vdaf.flp import encode_range_checked_int

    encoded = meas + encode_range_checked_int(vdaf.field, 3, cast(Any, valid).max_weight)
    seeds = [bytes([i]) * 32 for i in range(vdaf.RAND_SIZE // 32)]
    nonce = bytes(16)
    public, shares = vdaf._shard_with_joint_rand(CTX, encoded, nonce, seeds)
    _states, vshares = zip(
        *(vdaf.verify_init(bytes(32), CTX, j, None, nonce, public, shares[j]) for j in range(2)),
        strict=True,
    )
    with pytest.raises(VdafError, match="verifier check failed"):
        vdaf.verifier_shares_to_message(CTX, None, list(vshares))


def test_only_unary_encodings_compose() -> None:
    from client_sdk.mechanisms import mechanism_from_config

    with pytest.raises(ValueError, match="unary encoding"):
        Prio3UnaryRR(mechanism_from_config({"mechanism": "grr", "epsilon": 1.0, "k": 4}))  # type: ignore[arg-type]
