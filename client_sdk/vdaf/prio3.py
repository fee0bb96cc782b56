"""Prio3 of draft-irtf-cfrg-vdaf-20 (section "Prio3"): the Client shards its encoded measurement
and FLP proof(s) into additive shares, the Aggregators query their shares, combine the verifier
shares and check the joint randomness; only the sum of the output shares is ever revealed.

Field vectors are ``list[int]``. Input shares are ``(meas_share, proofs_share, blind)`` for the
Leader (aggregator 0) and ``(seed, blind)`` for each Helper, as in the draft.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from client_sdk.vdaf.errors import DecodeError, JointRandCheckError, VerifierCheckError
from client_sdk.vdaf.field import Field, Field64, Field128
from client_sdk.vdaf.flp import (
    Count,
    FlpBBCGGI19,
    Histogram,
    MultihotCountVec,
    Sum,
    SumVec,
    Valid,
)
from client_sdk.vdaf.xof import XofTurboShake128, format_dst

__all__ = [
    "Prio3",
    "Prio3Count",
    "Prio3Histogram",
    "Prio3MultihotCountVec",
    "Prio3Sum",
    "Prio3SumVec",
]

M = TypeVar("M")
R = TypeVar("R")

USAGE_MEAS_SHARE = 1
USAGE_PROOF_SHARE = 2
USAGE_JOINT_RANDOMNESS = 3
USAGE_PROVE_RANDOMNESS = 4
USAGE_QUERY_RANDOMNESS = 5
USAGE_JOINT_RAND_SEED = 6
USAGE_JOINT_RAND_PART = 7

PublicShare = list[bytes] | None
LeaderShare = tuple[list[int], list[int], bytes | None]
HelperShare = tuple[bytes, bytes | None]
InputShare = LeaderShare | HelperShare
VerifyState = tuple[list[int], bytes | None]
VerifierShare = tuple[list[int], bytes | None]
VerifierMessage = bytes | None


def _check_bytes(name: str, value: bytes, size: int) -> None:
    if not isinstance(value, (bytes, bytearray)) or len(value) != size:
        got = len(value) if isinstance(value, (bytes, bytearray)) else type(value).__name__
        raise ValueError(f"{name} must be {size} bytes, got {got}")


class Prio3(Generic[M, R]):
    """The generic Prio3 on one FLP; the variants below fix the circuit, field and ID."""

    xof = XofTurboShake128
    ID: int
    ROUNDS = 1
    NONCE_SIZE = 16
    VERIFY_KEY_SIZE = XofTurboShake128.SEED_SIZE

    def __init__(self, shares: int, valid: Valid[M, R], num_proofs: int = 1) -> None:
        if isinstance(shares, bool) or not isinstance(shares, int) or not 2 <= shares < 256:
            raise ValueError(f"shares must be an int in [2, 256), got {shares!r}")
        if not 1 <= num_proofs < 256:
            raise ValueError(f"num_proofs must be in [1, 256), got {num_proofs!r}")
        self.flp = FlpBBCGGI19(valid)
        self.field: type[Field] = valid.field
        self.SHARES = shares
        self.PROOFS = num_proofs
        seed = self.xof.SEED_SIZE
        self.RAND_SIZE = seed * shares * (2 if self.flp.JOINT_RAND_LEN > 0 else 1)

    # -- auxiliary functions (draft section "Auxiliary Functions") ----------------------------

    def domain_separation_tag(self, usage: int, ctx: bytes) -> bytes:
        return format_dst(0, self.ID, usage) + ctx

    def helper_meas_share(self, ctx: bytes, agg_id: int, share: bytes) -> list[int]:
        return self.xof.expand_into_vec(
            self.field,
            share,
            self.domain_separation_tag(USAGE_MEAS_SHARE, ctx),
            bytes([agg_id]),
            self.flp.MEAS_LEN,
        )

    def helper_proofs_share(self, ctx: bytes, agg_id: int, share: bytes) -> list[int]:
        return self.xof.expand_into_vec(
            self.field,
            share,
            self.domain_separation_tag(USAGE_PROOF_SHARE, ctx),
            bytes([self.PROOFS, agg_id]),
            self.flp.PROOF_LEN * self.PROOFS,
        )

    def expand_input_share(
        self, ctx: bytes, agg_id: int, input_share: InputShare
    ) -> tuple[list[int], list[int], bytes | None]:
        if agg_id > 0:
            if len(input_share) != 2:
                raise ValueError(f"input share of helper {agg_id} must be (seed, blind)")
            share, blind = input_share
            return (
                self.helper_meas_share(ctx, agg_id, share),
                self.helper_proofs_share(ctx, agg_id, share),
                blind,
            )
        if len(input_share) != 3:
            raise ValueError("the leader's input share must be (meas_share, proofs_share, blind)")
        meas_share, proofs_share, blind = input_share
        return list(meas_share), list(proofs_share), blind

    def prove_rands(self, ctx: bytes, prove_seed: bytes) -> list[int]:
        return self.xof.expand_into_vec(
            self.field,
            prove_seed,
            self.domain_separation_tag(USAGE_PROVE_RANDOMNESS, ctx),
            bytes([self.PROOFS]),
            self.flp.PROVE_RAND_LEN * self.PROOFS,
        )

    def query_rands(self, verify_key: bytes, ctx: bytes, nonce: bytes) -> list[int]:
        return self.xof.expand_into_vec(
            self.field,
            verify_key,
            self.domain_separation_tag(USAGE_QUERY_RANDOMNESS, ctx),
            bytes([self.PROOFS]) + nonce,
            self.flp.QUERY_RAND_LEN * self.PROOFS,
        )

    def joint_rand_part(
        self, ctx: bytes, agg_id: int, blind: bytes, meas_share: Sequence[int], nonce: bytes
    ) -> bytes:
        return self.xof.derive_seed(
            blind,
            self.domain_separation_tag(USAGE_JOINT_RAND_PART, ctx),
            bytes([agg_id]) + nonce + self.field.encode_vec(meas_share),
        )

    def joint_rand_seed(self, ctx: bytes, joint_rand_parts: Sequence[bytes]) -> bytes:
        return self.xof.derive_seed(
            bytes(self.xof.SEED_SIZE),
            self.domain_separation_tag(USAGE_JOINT_RAND_SEED, ctx),
            b"".join(joint_rand_parts),
        )

    def joint_rands(self, ctx: bytes, joint_rand_seed: bytes) -> list[int]:
        return self.xof.expand_into_vec(
            self.field,
            joint_rand_seed,
            self.domain_separation_tag(USAGE_JOINT_RANDOMNESS, ctx),
            bytes([self.PROOFS]),
            self.flp.JOINT_RAND_LEN * self.PROOFS,
        )

    # -- sharding ---------------------------------------------------------------------------

    def shard(
        self, ctx: bytes, measurement: M, nonce: bytes, rand: bytes
    ) -> tuple[PublicShare, list[InputShare]]:
        """Split ``measurement`` into ``SHARES`` input shares with proof shares; ``rand`` is
        ``RAND_SIZE`` bytes from a CSPRNG (``os.urandom`` on a device)."""
        _check_bytes("nonce", nonce, self.NONCE_SIZE)
        _check_bytes("rand", rand, self.RAND_SIZE)
        size = self.xof.SEED_SIZE
        seeds = [rand[i : i + size] for i in range(0, self.RAND_SIZE, size)]
        meas = self.flp.encode(measurement)
        if self.flp.JOINT_RAND_LEN > 0:
            return self._shard_with_joint_rand(ctx, meas, nonce, seeds)
        return self._shard_without_joint_rand(ctx, meas, seeds)

    def _prove_all(
        self, ctx: bytes, meas: list[int], prove_seed: bytes, joint_rands: list[int]
    ) -> list[int]:
        prove_rands = self.prove_rands(ctx, prove_seed)
        pr, jr = self.flp.PROVE_RAND_LEN, self.flp.JOINT_RAND_LEN
        proofs: list[int] = []
        for i in range(self.PROOFS):
            proofs += self.flp.prove(
                meas, prove_rands[i * pr : (i + 1) * pr], joint_rands[i * jr : (i + 1) * jr]
            )
        return proofs

    def _shard_without_joint_rand(
        self, ctx: bytes, meas: list[int], seeds: list[bytes]
    ) -> tuple[PublicShare, list[InputShare]]:
        helper_shares = seeds[: self.SHARES - 1]
        prove_seed = seeds[self.SHARES - 1]
        leader_meas = meas
        leader_proofs = self._prove_all(ctx, meas, prove_seed, [])
        for j, share in enumerate(helper_shares):
            leader_meas = self.field.vec_sub(leader_meas, self.helper_meas_share(ctx, j + 1, share))
            leader_proofs = self.field.vec_sub(
                leader_proofs, self.helper_proofs_share(ctx, j + 1, share)
            )
        input_shares: list[InputShare] = [(leader_meas, leader_proofs, None)]
        input_shares += [(share, None) for share in helper_shares]
        return None, input_shares

    def _shard_with_joint_rand(
        self, ctx: bytes, meas: list[int], nonce: bytes, seeds: list[bytes]
    ) -> tuple[PublicShare, list[InputShare]]:
        n_helpers = self.SHARES - 1
        helper_shares = seeds[0 : 2 * n_helpers : 2]
        helper_blinds = seeds[1 : 2 * n_helpers : 2]
        leader_blind, prove_seed = seeds[2 * n_helpers], seeds[2 * n_helpers + 1]
        leader_meas = meas
        parts: list[bytes] = []
        for j in range(n_helpers):
            helper_meas = self.helper_meas_share(ctx, j + 1, helper_shares[j])
            leader_meas = self.field.vec_sub(leader_meas, helper_meas)
            parts.append(self.joint_rand_part(ctx, j + 1, helper_blinds[j], helper_meas, nonce))
        parts.insert(0, self.joint_rand_part(ctx, 0, leader_blind, leader_meas, nonce))
        joint_rands = self.joint_rands(ctx, self.joint_rand_seed(ctx, parts))
        leader_proofs = self._prove_all(ctx, meas, prove_seed, joint_rands)
        for j in range(n_helpers):
            leader_proofs = self.field.vec_sub(
                leader_proofs, self.helper_proofs_share(ctx, j + 1, helper_shares[j])
            )
        input_shares: list[InputShare] = [(leader_meas, leader_proofs, leader_blind)]
        input_shares += [(helper_shares[j], helper_blinds[j]) for j in range(n_helpers)]
        return parts, input_shares

    # -- verification -----------------------------------------------------------------------

    def verify_init(
        self,
        verify_key: bytes,
        ctx: bytes,
        agg_id: int,
        agg_param: None,
        nonce: bytes,
        public_share: PublicShare,
        input_share: InputShare,
    ) -> tuple[VerifyState, VerifierShare]:
        """Query this Aggregator's shares: its verifier share and the state to finish with."""
        _check_bytes("verify_key", verify_key, self.VERIFY_KEY_SIZE)
        _check_bytes("nonce", nonce, self.NONCE_SIZE)
        if not 0 <= agg_id < self.SHARES:
            raise ValueError(f"agg_id must be in [0, {self.SHARES}), got {agg_id}")
        meas_share, proofs_share, blind = self.expand_input_share(ctx, agg_id, input_share)
        out_share = self.flp.truncate(meas_share)
        jr_len = self.flp.JOINT_RAND_LEN
        joint_rands: list[int] = []
        corrected_seed: bytes | None = None
        part: bytes | None = None
        if jr_len > 0:
            if blind is None or public_share is None:
                raise ValueError("this variant needs a blind and a public share")
            if len(public_share) != self.SHARES:
                raise ValueError(
                    f"public share: expected {self.SHARES} joint randomness parts, "
                    f"got {len(public_share)}"
                )
            part = self.joint_rand_part(ctx, agg_id, blind, meas_share, nonce)
            parts = list(public_share)
            parts[agg_id] = part
            corrected_seed = self.joint_rand_seed(ctx, parts)
            joint_rands = self.joint_rands(ctx, corrected_seed)
        query_rands = self.query_rands(verify_key, ctx, nonce)
        pl, ql = self.flp.PROOF_LEN, self.flp.QUERY_RAND_LEN
        verifiers: list[int] = []
        for i in range(self.PROOFS):
            verifiers += self.flp.query(
                meas_share,
                proofs_share[i * pl : (i + 1) * pl],
                query_rands[i * ql : (i + 1) * ql],
                joint_rands[i * jr_len : (i + 1) * jr_len],
                self.SHARES,
            )
        return (out_share, corrected_seed), (verifiers, part)

    def verifier_shares_to_message(
        self, ctx: bytes, agg_param: None, verifier_shares: Sequence[VerifierShare]
    ) -> VerifierMessage:
        """Combine the verifier shares and decide; raise ``VerifierCheckError`` naming the
        failed check. Returns the joint randomness seed the Aggregators agree on."""
        if len(verifier_shares) != self.SHARES:
            raise ValueError(f"need {self.SHARES} verifier shares, got {len(verifier_shares)}")
        vl = self.flp.VERIFIER_LEN
        verifiers = [0] * (vl * self.PROOFS)
        parts: list[bytes] = []
        for share, part in verifier_shares:
            verifiers = self.field.vec_add(verifiers, share)
            if self.flp.JOINT_RAND_LEN > 0:
                if part is None:
                    raise ValueError("a verifier share lacks its joint randomness part")
                parts.append(part)
        for i in range(self.PROOFS):
            failed = self.flp.failed_check(verifiers[i * vl : (i + 1) * vl])
            if failed is not None:
                raise VerifierCheckError(f"proof {i} verifier check failed: {failed}")
        return self.joint_rand_seed(ctx, parts) if self.flp.JOINT_RAND_LEN > 0 else None

    def verify_next(
        self, ctx: bytes, verify_state: VerifyState, verifier_message: VerifierMessage
    ) -> list[int]:
        out_share, corrected_seed = verify_state
        if verifier_message != corrected_seed:
            raise JointRandCheckError(
                "joint randomness check failed: the seed the Aggregators derived differs from "
                "the one the Client's public share implies"
            )
        return out_share

    # -- aggregation ------------------------------------------------------------------------

    def is_valid(self, agg_param: None, previous_agg_params: Sequence[None]) -> bool:
        return len(previous_agg_params) == 0

    def agg_init(self, agg_param: None) -> list[int]:
        return [0] * self.flp.OUTPUT_LEN

    def agg_update(self, agg_param: None, agg_share: list[int], out_share: list[int]) -> list[int]:
        return self.field.vec_add(agg_share, out_share)

    def merge(self, agg_param: None, agg_shares: Sequence[list[int]]) -> list[int]:
        agg = self.agg_init(agg_param)
        for share in agg_shares:
            agg = self.field.vec_add(agg, share)
        return agg

    def unshard(self, agg_param: None, agg_shares: Sequence[list[int]], num_measurements: int) -> R:
        return self.flp.decode(self.merge(agg_param, agg_shares), num_measurements)

    # -- messages (draft section "Message Serialization") -------------------------------------

    def _take(self, encoded: bytes, offset: int, size: int, name: str) -> bytes:
        chunk = encoded[offset : offset + size]
        if len(chunk) != size:
            raise DecodeError(f"{name}: truncated, expected {size} bytes at offset {offset}")
        return chunk

    def _decode_exact(self, encoded: bytes, length: int, name: str) -> list[int]:
        size = length * self.field.ENCODED_SIZE
        if len(encoded) != size:
            raise DecodeError(f"{name}: expected {size} bytes, got {len(encoded)}")
        return self.field.decode_vec(encoded, name)

    def encode_public_share(self, public_share: PublicShare) -> bytes:
        return b"".join(public_share) if public_share is not None else b""

    def decode_public_share(self, encoded: bytes) -> PublicShare:
        if self.flp.JOINT_RAND_LEN == 0:
            if encoded:
                raise DecodeError(f"public share: expected 0 bytes, got {len(encoded)}")
            return None
        s = self.xof.SEED_SIZE
        if len(encoded) != s * self.SHARES:
            raise DecodeError(f"public share: expected {s * self.SHARES} bytes, got {len(encoded)}")
        return [encoded[i : i + s] for i in range(0, len(encoded), s)]

    def encode_input_share(self, input_share: InputShare) -> bytes:
        if len(input_share) == 3:
            meas, proofs, blind = input_share
            out = self.field.encode_vec(meas) + self.field.encode_vec(proofs)
        else:
            seed, blind = input_share
            out = bytes(seed)
        return out + (blind if blind is not None else b"")

    def decode_input_share(self, agg_id: int, encoded: bytes) -> InputShare:
        s = self.xof.SEED_SIZE
        blind_len = s if self.flp.JOINT_RAND_LEN > 0 else 0
        if agg_id == 0:
            meas_len = self.flp.MEAS_LEN * self.field.ENCODED_SIZE
            proofs_len = self.flp.PROOF_LEN * self.PROOFS * self.field.ENCODED_SIZE
            if len(encoded) != meas_len + proofs_len + blind_len:
                raise DecodeError(
                    f"leader input share: expected {meas_len + proofs_len + blind_len} bytes, "
                    f"got {len(encoded)}"
                )
            meas = self.field.decode_vec(encoded[:meas_len], "leader measurement share")
            proofs = self.field.decode_vec(
                encoded[meas_len : meas_len + proofs_len], "leader proofs share"
            )
            blind = encoded[meas_len + proofs_len :] if blind_len else None
            return meas, proofs, blind
        if len(encoded) != s + blind_len:
            raise DecodeError(
                f"helper input share: expected {s + blind_len} bytes, got {len(encoded)}"
            )
        return encoded[:s], (encoded[s:] if blind_len else None)

    def encode_verifier_share(self, verifier_share: VerifierShare) -> bytes:
        verifiers, part = verifier_share
        return self.field.encode_vec(verifiers) + (part if part is not None else b"")

    def decode_verifier_share(
        self, verify_state: VerifyState | None, encoded: bytes
    ) -> VerifierShare:
        size = self.flp.VERIFIER_LEN * self.PROOFS * self.field.ENCODED_SIZE
        part_len = self.xof.SEED_SIZE if self.flp.JOINT_RAND_LEN > 0 else 0
        if len(encoded) != size + part_len:
            raise DecodeError(
                f"verifier share: expected {size + part_len} bytes, got {len(encoded)}"
            )
        verifiers = self.field.decode_vec(encoded[:size], "verifier share")
        return verifiers, (encoded[size:] if part_len else None)

    def encode_verifier_message(self, verifier_message: VerifierMessage) -> bytes:
        return verifier_message if verifier_message is not None else b""

    def decode_verifier_message(
        self, verify_state: VerifyState | None, encoded: bytes
    ) -> VerifierMessage:
        expected = self.xof.SEED_SIZE if self.flp.JOINT_RAND_LEN > 0 else 0
        if len(encoded) != expected:
            raise DecodeError(f"verifier message: expected {expected} bytes, got {len(encoded)}")
        return encoded if expected else None

    def encode_agg_share(self, agg_share: Sequence[int]) -> bytes:
        return self.field.encode_vec(agg_share)

    def decode_agg_share(self, agg_param: None, encoded: bytes) -> list[int]:
        return self._decode_exact(encoded, self.flp.OUTPUT_LEN, "aggregate share")

    def encode_out_share(self, out_share: Sequence[int]) -> bytes:
        return self.field.encode_vec(out_share)

    def decode_out_share(self, encoded: bytes) -> list[int]:
        return self._decode_exact(encoded, self.flp.OUTPUT_LEN, "output share")


class Prio3Count(Prio3[int, int]):
    """Counts of 0/1 measurements over Field64 (ID 1)."""

    ID = 0x00000001

    def __init__(self, shares: int) -> None:
        super().__init__(shares, Count(Field64))


class Prio3Sum(Prio3[int, int]):
    """Sums of integers in ``[0, max_measurement]`` over Field64 (ID 2)."""

    ID = 0x00000002

    def __init__(self, shares: int, max_measurement: int) -> None:
        super().__init__(shares, Sum(Field64, max_measurement))


class Prio3SumVec(Prio3[list[int], list[int]]):
    """Element-wise sums of ``length`` integers in ``[0, max_measurement]`` over Field128 (ID 3)."""

    ID = 0x00000003

    def __init__(self, shares: int, length: int, max_measurement: int, chunk_length: int) -> None:
        super().__init__(shares, SumVec(Field128, length, max_measurement, chunk_length))


class Prio3Histogram(Prio3[int, list[int]]):
    """Histograms of a bucket index in ``[0, length)`` over Field128 (ID 4)."""

    ID = 0x00000004

    def __init__(self, shares: int, length: int, chunk_length: int) -> None:
        super().__init__(shares, Histogram(Field128, length, chunk_length))


class Prio3MultihotCountVec(Prio3[list[bool], list[int]]):
    """Counts of 0/1 vectors with at most ``max_weight`` ones over Field128 (ID 5)."""

    ID = 0x00000005

    def __init__(self, shares: int, length: int, max_weight: int, chunk_length: int) -> None:
        super().__init__(shares, MultihotCountVec(Field128, length, max_weight, chunk_length))
