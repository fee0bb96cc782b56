"""Ports written from docs/protocol.md alone (plain integers, hashlib, no numpy): each reproduces
every committed conformance vector of its mechanism, so the page says everything a second
implementation needs. The word source and the helpers shared with the first ports are those of
tests/client_sdk/test_conformance.py; the mechanism's code is used only to parse the config
(its exact thresholds and noise parameters)."""

from __future__ import annotations

import base64
import bisect
import hashlib
import hmac
import itertools
import json
import math
from typing import Any

import pytest

from client_sdk.conformance import VECTORS_DIR
from client_sdk.conformance.vectors import load_vectors
from client_sdk.mechanisms import mechanism_from_config
from tests.client_sdk.test_conformance import (
    _bits,
    _duchi,
    _memo_words,
    _piecewise,
    _port,
    _round,
    _Words,
)


def _mechanism(config: dict[str, Any]) -> Any:
    """The Python mechanism of ``config``, whose constants (thresholds, kernels, grids) a port
    reads: typed ``Any``, each port knows its own class."""
    return mechanism_from_config(config)


@pytest.fixture(scope="module")
def committed() -> dict[str, dict[str, Any]]:
    return load_vectors(VECTORS_DIR)


# ---- the exact discrete samplers (docs/protocol.md, "Discrete Laplace and Gaussian noise")


def _below_each(words: _Words, highs: list[int]) -> list[int]:
    """uniform_below with one high per draw: rejected draws are drawn again together."""
    out = [0] * len(highs)
    pending = list(range(len(highs)))
    while pending:
        drawn = words.take(len(pending))
        again = []
        for index, word in zip(pending, drawn, strict=True):
            high = highs[index]
            if word < 2**64 - 2**64 % high:
                out[index] = word % high
            else:
                again.append(index)
        pending = again
    return out


def _random_bits(words: _Words, n: int) -> list[bool]:
    """random_bits(n): the words' little-endian bytes, most significant bit first."""
    data = b"".join(w.to_bytes(8, "little") for w in words.take(-(-n // 64)))
    return [bool(data[i // 8] >> (7 - i % 8) & 1) for i in range(n)]


def _bexp_unit(words: _Words, nums: list[int], dens: list[int]) -> list[bool]:
    """Bernoulli(exp(-num/den)) for num <= den: K = 1; while Bernoulli(num/(den K)), K += 1;
    the draw is "K is odd". Rounds over the pending draws."""
    out = [False] * len(nums)
    k = [1] * len(nums)
    pending = list(range(len(nums)))
    while pending:
        drawn = _below_each(words, [dens[i] * k[i] for i in pending])
        still = []
        for index, u in zip(pending, drawn, strict=True):
            if u < nums[index]:
                still.append(index)
                k[index] += 1
            else:
                out[index] = k[index] % 2 == 1
        pending = still
    return out


def _bexp(words: _Words, nums: list[int], dens: list[int]) -> list[bool]:
    """Bernoulli(exp(-num/den)) for any num >= 0: floor(num/den) Bernoulli(exp(-1)) rounds over
    the draws still alive, then one Bernoulli(exp(-frac)) for those that survived."""
    result = [True] * len(nums)
    remaining = {i: nums[i] // dens[i] for i in range(len(nums)) if nums[i] >= dens[i]}
    pending = list(remaining)
    while pending:
        success = _bexp_unit(words, [1] * len(pending), [1] * len(pending))
        still = []
        for index, ok in zip(pending, success, strict=True):
            if not ok:
                result[index] = False
            elif remaining[index] > 1:
                remaining[index] -= 1
                still.append(index)
        pending = still
    alive = [i for i in range(len(nums)) if result[i]]
    fractions = _bexp_unit(words, [nums[i] % dens[i] for i in alive], [dens[i] for i in alive])
    for index, ok in zip(alive, fractions, strict=True):
        result[index] = ok
    return result


def _count_successes(words: _Words, n: int) -> list[int]:
    """Per draw, the Bernoulli(exp(-1)) successes before its first failure (rounds)."""
    count = [0] * n
    active = list(range(n))
    while active:
        success = _bexp_unit(words, [1] * len(active), [1] * len(active))
        active = [i for i, ok in zip(active, success, strict=True) if ok]
        for index in active:
            count[index] += 1
    return count


def _discrete_laplace(words: _Words, t: int, s: int, n: int) -> list[int]:
    """n draws of the discrete Laplace of scale t/s (CKS 2020, Algorithm 2), in rounds."""
    out = [0] * n
    pending = list(range(n))
    while pending:
        u = _below_each(words, [t] * len(pending))
        keep = _bexp_unit(words, u, [t] * len(pending))
        candidates = [j for j, ok in enumerate(keep) if ok]
        v = _count_successes(words, len(candidates))
        negative = _random_bits(words, len(candidates))
        done = set()
        for j, count, minus in zip(candidates, v, negative, strict=True):
            y = (u[j] + t * count) // s
            if minus and y == 0:
                continue
            out[pending[j]] = -y if minus else y
            done.add(j)
        pending = [index for j, index in enumerate(pending) if j not in done]
    return out


def _discrete_gaussian(words: _Words, t: int, m: int, n: int) -> list[int]:
    """n draws of N_Z(0, t m) (CKS 2020, Algorithm 3): a discrete Laplace proposal of scale t,
    accepted with probability exp(-(|y| - m)^2 / (2 t m)), in rounds."""
    out = [0] * n
    pending = list(range(n))
    while pending:
        y = _discrete_laplace(words, t, 1, len(pending))
        gaps = [(abs(value) - m) ** 2 for value in y]
        accept = _bexp(words, gaps, [2 * t * m] * len(pending))
        for index, value, ok in zip(pending, y, accept, strict=True):
            if ok:
                out[index] = value
        pending = [index for index, ok in zip(pending, accept, strict=True) if not ok]
    return out


def test_a_port_of_the_laplace_and_gaussian_mechanisms_reproduces_the_vectors(
    committed: dict[str, Any],
) -> None:
    """The grid position, randomized rounding and the exact discrete noise, ported from
    docs/protocol.md, give every committed laplace and gaussian payload (scalars and vectors)."""
    checked = 0
    for case in committed["laplace"]["cases"]:
        mechanism = _mechanism(case["config"])
        lower, upper = float(case["config"]["lower"]), float(case["config"]["upper"])
        steps = mechanism.grid_steps
        position = (min(max(float(case["value"]), lower), upper) - lower) / mechanism.grid_step
        words = _Words(bytes.fromhex(case["words_key"]))
        snapped = _round(words, position, steps)
        scale = mechanism.noise.scale
        (noise,) = _discrete_laplace(words, scale.numerator, scale.denominator, 1)
        assert snapped + noise == case["payload"], case["value"]
        checked += 1
    for case in committed["gaussian"]["cases"]:
        config = case["config"]
        mechanism = _mechanism(config)
        words = _Words(bytes.fromhex(case["words_key"]))
        if config.get("dim") is None:
            lower, upper = float(config["lower"]), float(config["upper"])
            x = min(max(float(case["value"]), lower), upper)
            rounded = [_round(words, (x - lower) / mechanism.grid_step, mechanism.grid_steps)]
        else:
            x_vec = [float(v) for v in case["value"]]
            norm = math.sqrt(sum(v * v for v in x_vec))
            shrink = min(1.0, config["clip_norm"] / max(norm, 2.2250738585072014e-308))
            factor = shrink / mechanism.grid_step
            positions = [v * factor for v in x_vec]
            # no top: base = floor(u), one rounding word per coordinate, all before the noise
            rounded = []
            for u in positions:
                base = math.floor(u)
                phi = u - base
                threshold = int(min(math.floor(phi * 2.0**64), math.nextafter(2.0**64, 0.0)))
                rounded.append(base + (words.take(1)[0] < threshold or phi >= 1.0))
        noises = _discrete_gaussian(words, mechanism.noise.t, mechanism.noise.m, len(rounded))
        payload = [a + z for a, z in zip(rounded, noises, strict=True)]
        assert (payload if config.get("dim") else payload[0]) == case["payload"], case["value"]
        checked += 1
    assert checked == 14


# ---- PEM (docs/protocol.md, "Strings")

_PRIME = 2**31 - 1


def _pem_bits(config: dict[str, Any], value: str) -> list[int]:
    """The value's bit string: its length, then its symbols padded with 0 to max_length; the
    reserved symbol is length 0 with first symbol 1."""
    max_length, alphabet = config["max_length"], config.get("alphabet")
    if alphabet is None:
        width, symbols = 8, list(value.encode())
        fits = len(symbols) <= max_length
    else:
        width = max(1, (len(alphabet) - 1).bit_length())
        fits = len(value) <= max_length and all(c in alphabet for c in value)
        symbols = [alphabet.index(c) for c in value] if fits else []
    length_bits = max_length.bit_length()
    if not fits:
        symbols = [1]
    length = len(symbols) if fits else 0
    padded = symbols + [0] * (max_length - len(symbols))
    bits = [(length >> i) & 1 for i in range(length_bits - 1, -1, -1)]
    for symbol in padded:
        bits += [(symbol >> i) & 1 for i in range(width - 1, -1, -1)]
    return bits


def _pem(case: dict[str, Any], words: _Words, threshold: int | None = None) -> dict[str, Any]:
    """One PEM report from ``words`` at the keep threshold (default: the config's)."""
    config = case["config"]
    max_length, alphabet = config["max_length"], config.get("alphabet")
    width = 8 if alphabet is None else max(1, (len(alphabet) - 1).bit_length())
    total = max_length.bit_length() + width * max_length
    start, step = config["start_bits"], config["step_bits"]
    levels = 1 + -(-(total - start) // step)
    # the level: uniform_below(levels - 1 + final_weight) from the keyed source, capped
    u = _memo_words(case, "pem:level", 0).below(levels - 1 + config["final_weight"])
    level = min(u, levels - 1)
    prefix_bits = min(start + level * step, total)
    chunk_count = -(-prefix_bits // 30)
    seed_width = -(-min(start + (levels - 1) * step, total) // 30) + 1
    seeds = _below_each(words, [_PRIME] * seed_width)
    seeds = seeds[:chunk_count] + [0] * (seed_width - 1 - chunk_count) + [seeds[-1]]
    bits = _pem_bits(config, case["value"])[:prefix_bits]
    r = seeds[-1]
    for t in range(chunk_count):
        chunk = int("".join(map(str, bits[30 * t : 30 * t + 30])), 2)
        r = (r + seeds[t] * chunk) % _PRIME
    g = config["g"]
    hashed = r * g // _PRIME
    if threshold is None:
        threshold = _mechanism(config)._keep_threshold
    keep = words.take(1)[0] < threshold
    if g == 2:
        y = hashed if keep else 1 - hashed
    else:
        other = words.below(g - 1)
        y = hashed if keep else other + (other >= hashed)
    return {"level": level, "seed": [*seeds[:chunk_count], seeds[-1]], "y": y}


def test_a_port_of_pem_reproduces_the_vectors(committed: dict[str, Any]) -> None:
    """PEM's level, bit string, seeds, chunked hash and randomized response, ported from
    docs/protocol.md, give every committed payload without ``longitudinal``."""
    checked = 0
    for case in committed["pem"]["cases"]:
        if "longitudinal" in case["config"]:
            continue
        words = _Words(bytes.fromhex(case["words_key"]))
        assert _pem(case, words) == case["payload"], case["value"]
        checked += 1
    assert checked == 7


# ---- SFP (docs/protocol.md, "Strings")


def _below_32(words: _Words, high: int) -> int:
    """uniform_below_32 of one draw: the first lane (16 bits when high <= 2**12, else 32) of a
    word, multiply-shift, a rejected lane redrawn from a new word."""
    lane = 16 if high <= 1 << 12 else 32
    while True:
        product = (words.take(1)[0] & ((1 << lane) - 1)) * high
        if product % (1 << lane) >= (1 << lane) % high:
            return product >> lane


def _sfp(config: dict[str, Any], value: str, words: _Words) -> dict[str, int]:
    mechanism = _mechanism(config)
    m, hashes, max_length = config["m"], config["hashes"], config["max_length"]
    raw = value.encode()
    raw = raw if len(raw) <= max_length else b"\xff"
    seed = config["seed"].to_bytes(8, "big")
    # the word: one-bit HCMS at epsilon_word
    digest = hashlib.blake2b(raw, digest_size=4 * hashes, key=b"ldp-telemetry/sketch/v1" + seed)
    row = _below_32(words, hashes) if hashes > 1 else 0
    bucket = int.from_bytes(digest.digest()[4 * row : 4 * row + 4], "little") & (m - 1)
    column = _below_32(words, m)
    plus = bin(bucket & column).count("1") % 2 == 0
    flip = words.lazy(mechanism.word_sketch._flip_threshold, 1)[0]
    word = (row * m + column) * 2 + (plus != flip)
    # the offset, in the clear, then the fragment (tag, byte) by Hadamard response
    offset = _below_32(words, max_length) if max_length > 1 else 0
    tag = hashlib.blake2b(raw, digest_size=1, key=b"ldp-telemetry/sfp-tag/v1" + seed).digest()[0]
    fragment = 256 * tag + raw.ljust(max_length, b"\x00")[offset]
    hr = {
        "mechanism": "hr",
        "epsilon": mechanism.epsilon_fragment,
        "k": 65536,
        "blocks": config["fragment_blocks"],
    }
    return {"fragment": _port(hr, fragment, words), "offset": offset, "word": word}


def test_a_port_of_sfp_reproduces_the_vectors(committed: dict[str, Any]) -> None:
    """SFP's word sketch (HCMS), offset and fragment (keyed BLAKE2b tag, Hadamard response),
    ported from docs/protocol.md, give every committed payload without ``longitudinal``."""
    checked = 0
    for case in committed["sfp"]["cases"]:
        if "longitudinal" in case["config"]:
            continue
        words = _Words(bytes.fromhex(case["words_key"]))
        assert _sfp(case["config"], case["value"], words) == case["payload"], case["value"]
        checked += 1
    assert checked == 4


# ---- hierarchical (docs/protocol.md, "Structures")


def _hierarchical(case: dict[str, Any], words: _Words) -> list[Any]:
    config = case["config"]
    k, epsilon, value = config["k"], config["epsilon"], case["value"]
    if config.get("variant") == "haar":
        height = max(1, (k - 1).bit_length())
        level = _memo_words(case, "haar:level", 0).below(height) + 1
        node, right = value >> (height - level + 1), (value >> (height - level)) & 1
        row = words.below(1 << (level - 1))
        truth_minus = (bin(row & node).count("1") % 2 == 1) != bool(right)
        keep = words.take(1)[0] < _mechanism(config)._keep
        return [level, 2 * row + int(truth_minus != keep)]

    def height_of(b: int) -> int:
        h, size = 1, b
        while size < k:
            h, size = h + 1, size * b
        return h

    branching = config.get("branching") or min(
        range(2, 17), key=lambda b: ((b - 1) * height_of(b) ** 2, b)
    )
    height = height_of(branching)
    level = _memo_words(case, "hierarchical:level", 0).below(height) + 1
    node = value // branching ** (height - level)
    # the level's oracle (GRR or OUE, the smaller exact total variance) is read from the config
    oracle = _mechanism(config).oracles[level - 1].name
    inner = {"mechanism": oracle, "epsilon": epsilon, "k": branching**level}
    return [level, _port(inner, node, words)]


def test_a_port_of_hierarchical_reproduces_the_vectors(committed: dict[str, Any]) -> None:
    """The B-ary tree (level from the keyed source, the node, GRR or OUE) and the Haar variant
    (level, Hadamard row, binary randomized response), ported from docs/protocol.md, give every
    committed payload."""
    for case in committed["hierarchical"]["cases"]:
        words = _Words(bytes.fromhex(case["words_key"]))
        assert _hierarchical(case, words) == case["payload"], (case["config"], case["value"])


# ---- multi and bernoulli_bytes (docs/protocol.md, "Structures" and "Random words")


def _interval_cell(cumulative: list[int], prefix: int, bits: int) -> int | None:
    """The byte whose cell holds the whole interval [prefix, prefix + 1) / 2**bits, or None."""
    begin = prefix << (512 - bits)
    cell = bisect.bisect_right(cumulative, begin) - 1
    return cell if (prefix + 1) << (512 - bits) <= cumulative[cell + 1] else None


def _bernoulli_bytes(words: _Words, threshold: int, count: int) -> list[int]:
    """bernoulli_bytes(T, count): each byte the cell of a lazily drawn uniform number in the
    exact cumulative distribution of the 256 byte values (8-bit heads or 16-bit lanes first)."""
    one, zero = threshold, 2**64 - threshold
    cumulative = [0]
    for b in range(256):
        cumulative.append(cumulative[-1] + one ** b.bit_count() * zero ** (8 - b.bit_count()))
    out: list[int | None]
    heads_deciding = sum(_interval_cell(cumulative, h, 8) is not None for h in range(256))
    if heads_deciding < 192:
        data = b"".join(w.to_bytes(8, "little") for w in words.take(-(-count // 4)))
        lanes = [int.from_bytes(data[2 * i : 2 * i + 2], "little") for i in range(count)]
        out = [_interval_cell(cumulative, u, 16) for u in lanes]
        pending = list(range(count))
    else:
        heads = b"".join(w.to_bytes(8, "little") for w in words.take(-(-count // 8)))[:count]
        out = [_interval_cell(cumulative, h, 8) for h in heads]
        pending = [i for i in range(count) if out[i] is None]
        low = b"".join(w.to_bytes(8, "little") for w in words.take(-(-len(pending) // 8)))
        lanes = [0] * count
        for i, byte in zip(pending, low, strict=False):
            lanes[i] = heads[i] << 8 | byte
            out[i] = _interval_cell(cumulative, lanes[i], 16)
    straddles = [i for i in pending if out[i] is None]
    refined = dict(zip(straddles, words.take(len(straddles)), strict=True))
    for i in straddles:  # one word each, together; then the rare ties one by one
        prefix, bits = lanes[i] << 64 | refined[i], 80
        while (cell := _interval_cell(cumulative, prefix, bits)) is None and bits < 512:
            prefix, bits = prefix << 64 | words.take(1)[0], bits + 64
        out[i] = cell
    return [int(b) for b in out]  # type: ignore[arg-type]


def _compact(oracle: Any, value: int, words: _Words) -> Any:
    """A unit's report from its oracle's compact sampler."""

    def keep_or_other(value: int, size: int) -> int:
        keep = words.lazy(oracle._keep_threshold, 1)[0]
        if size == 2:
            return value if keep else 1 - value
        other = _below_32(words, size - 1)
        return value if keep else other + (other >= value)

    if oracle.name == "grr":
        return keep_or_other(value, oracle.k)
    if oracle.name == "olh":
        prime, g = 2**31 - 1, oracle.buckets

        def below_bits(high: int) -> int:  # the top bitlen(high - 1) bits of a 32-bit lane
            while True:
                lane = (words.take(1)[0] & 0xFFFFFFFF) >> (32 - (high - 1).bit_length())
                if lane < high:
                    return lane

        a_less_one = below_bits(prime - 1)
        b = below_bits(prime)
        seed = a_less_one * prime + b
        hashed = g * (((a_less_one + 1) * value + b) % prime) // prime
        return {"seed": f"{seed:016x}", "y": keep_or_other(hashed, g)}
    assert oracle.name == "oue"
    p, q = oracle._thresholds
    size = -(-oracle.k // 8)
    row = _bernoulli_bytes(words, q, size)
    row[-1] &= (0xFF << (8 * size - oracle.k)) & 0xFF
    bit = _random_bits(words, 1)[0] if p == 2**63 else words.lazy(p, 1)[0]
    mask = 0x80 >> (value & 7)
    row[value >> 3] = (row[value >> 3] & ~mask) | (mask if bit else 0)
    return base64.urlsafe_b64encode(bytes(row)).decode().rstrip("=")


def _record(attributes: list[dict[str, Any]], value: dict[str, Any]) -> list[int]:
    """A record's indices in the config's attribute order (a label's index, or the index)."""
    out = []
    for attribute in attributes:
        given = value[attribute["name"]]
        out.append(attribute["labels"].index(given) if "labels" in attribute else given)
    return out


def _multi(case: dict[str, Any], words: _Words) -> Any:
    config = case["config"]
    mechanism = _mechanism(config)
    attributes = config["attributes"]
    names = [a["name"] for a in attributes]
    ks = [a["k"] for a in attributes]
    x = _record(attributes, case["value"])
    marginals = config.get("marginals")
    units = [[names.index(n) for n in m] for m in marginals or [[n] for n in names]]

    def cell(unit: int) -> int:
        out = 0
        for a in units[unit]:
            out = out * ks[a] + x[a]
        return out

    oracles = mechanism.oracles  # the oracle of each unit, as the config resolves them
    if config["protocol"] == "spl":
        return [_compact(oracles[j], x[j], words) for j in range(len(x))]
    unit = _memo_words(case, "multi:unit", 0).below(len(units))
    if config["protocol"] == "smp":
        return [unit, _compact(oracles[unit], cell(unit), words)]
    # RS+FD: attribute by attribute, the sampled one's report, every other one's fake value
    return [
        _compact(oracles[j], x[j], words) if j == unit else _below_32(words, ks[j])
        for j in range(len(x))
    ]


def test_a_port_of_multi_reproduces_the_vectors(committed: dict[str, Any]) -> None:
    """SPL, SMP (with and without marginal tables: GRR, OUE by ``bernoulli_bytes``, OLH) and
    RS+FD, ported from docs/protocol.md, give every committed multi payload."""
    for case in committed["multi"]["cases"]:
        words = _Words(bytes.fromhex(case["words_key"]))
        assert _multi(case, words) == case["payload"], (case["config"], case["value"])


# ---- fourier (docs/protocol.md, "Structures")


def test_a_port_of_fourier_reproduces_the_vectors(committed: dict[str, Any]) -> None:
    """The device's coefficient (attribute sets by order, then lexicographically) and the
    randomized parity bit, ported from docs/protocol.md, give every committed fourier payload."""
    for case in committed["fourier"]["cases"]:
        config = case["config"]
        attributes = config["attributes"]
        x = _record(attributes, case["value"])
        masks = [
            subset
            for size in range(1, config["order"] + 1)
            for subset in itertools.combinations(range(len(x)), size)
        ]
        chosen = _memo_words(case, "fourier:coefficient", 0).below(len(masks))
        parity = sum(x[j] for j in masks[chosen]) % 2
        words = _Words(bytes.fromhex(case["words_key"]))
        keep = words.take(1)[0] < _mechanism(config)._keep_threshold
        assert [chosen, parity if keep else 1 - parity] == case["payload"], case["value"]


@pytest.mark.parametrize("q", [0.5, 0.27, 0.119, 0.02, 1e-6])
def test_the_pages_bernoulli_bytes_is_the_sdks_in_both_modes(q: float) -> None:
    """The multi vectors exercise one threshold; the page's ``bernoulli_bytes`` (8-bit heads
    where at least 192 decide, else 16-bit lanes; straddles refined by a word) gives the SDK's
    bytes, and leaves the word source at the same place, at thresholds of both modes."""
    from client_sdk.randomness import HmacWordSource, bernoulli_bytes, raw_words

    threshold = int(q * 2**64)
    for seed in range(40):
        key = bytes([seed]) * 16
        count = 1 + seed
        source = HmacWordSource(key)
        expected = bernoulli_bytes(source, threshold, count).tolist()
        words = _Words(key)
        assert _bernoulli_bytes(words, threshold, count) == expected, (q, seed)
        assert words.take(1)[0] == int(raw_words(source, 1)[0]), (q, seed)


def test_the_hr_port_covers_the_largest_k(committed: dict[str, Any]) -> None:
    """HR's large-domain cases (many blocks, b = 2**19) follow the same page steps as k = 10."""
    large = [c for c in committed["hr"]["cases"] if c["config"]["k"] >= 1 << 20]
    assert large and all("longitudinal" not in c["config"] for c in large)
    for case in large:
        words = _Words(bytes.fromhex(case["words_key"]))
        assert _port(case["config"], case["value"], words) == case["payload"], case["value"]


def test_a_port_of_pckv_ue_reproduces_the_vectors(committed: dict[str, Any]) -> None:
    """PCKV-UE (the same sampling draws as PCKV-GRR, then the two unary rows over k + l keys),
    ported from docs/protocol.md, gives every committed ``"variant": "ue"`` payload."""
    checked = 0
    for case in committed["pckv"]["cases"]:
        config = case["config"]
        if config.get("variant") != "ue":
            continue
        pairs = sorted((int(key), number) for key, number in case["value"].items())
        ell, k = config["padding"], config["k"]
        words = _Words(bytes.fromhex(case["words_key"]))
        slot = words.below(max(len(pairs), ell))
        dummy = words.below(ell) + k
        key, number = pairs[slot] if slot < len(pairs) else (dummy, 0.0)
        scaled = min(math.floor((1 + number) / 2 * 2.0**64), math.nextafter(2.0**64, 0))
        plus = words.take(1)[0] < int(scaled) or number >= 1.0
        _, t_sign, t_nonzero = _mechanism(config)._thresholds
        sign = plus if words.take(1)[0] < t_sign else not plus
        nonzero = words.lazy(t_nonzero, k + ell)
        positive = _random_bits(words, k + ell)
        nonzero[key] = _random_bits(words, 1)[0]
        positive[key] = sign
        rows = [[n and p for n, p in zip(nonzero, positive, strict=True)]]
        rows.append([n and not p for n, p in zip(nonzero, positive, strict=True)])
        assert [_bits(row) for row in rows] == case["payload"], case["value"]
        checked += 1
    assert checked == 2


# ---- ss (docs/protocol.md, "Categorical frequency oracles")


def _below_32_each(words: _Words, highs: list[int]) -> list[int]:
    """uniform_below_32 with one high per draw: L-bit lanes (16 when every high <= 2**12),
    multiply-shift, the rejected draws redrawn together by the same function."""
    lane = 16 if max(highs) <= 1 << 12 else 32
    per_word = 64 // lane
    data = b"".join(w.to_bytes(8, "little") for w in words.take(-(-len(highs) // per_word)))
    out, rejected = [], []
    for i, high in enumerate(highs):
        u = int.from_bytes(data[i * lane // 8 : (i + 1) * lane // 8], "little")
        product = u * high
        out.append(product >> lane)
        if product % (1 << lane) < (1 << lane) % high:
            rejected.append(i)
    if rejected:
        again = _below_32_each(words, [highs[i] for i in rejected])
        for i, value in zip(rejected, again, strict=True):
            out[i] = value
    return out


def _ss(words: _Words, k: int, d: int, include_threshold: int, x: int) -> list[bool]:
    """Subset selection's row (docs/protocol.md, ss)."""
    include = words.take(1)[0] < include_threshold
    complement = 2 * d > k
    members = k - d if complement else d
    has_x = include != complement
    first = k - 1 - members
    steps = list(range(first, k - 1))
    chosen: set[int] = set()
    for j, t in zip(steps, _below_32_each(words, [j + 1 for j in steps]), strict=True):
        if j == first and has_x:
            continue  # a row already holding x needs one member fewer
        chosen.add(j if t in chosen else t)
    row = [False] * k
    for index in chosen:
        row[k - 1 if index == x else index] = True
    row[x] = has_x
    return [not bit for bit in row] if complement else row


def test_a_port_of_ss_reproduces_the_vectors(committed: dict[str, Any]) -> None:
    """Subset selection (the inclusion word, Floyd's algorithm over the k - 1 others with all
    its draws in one call, the complement when 2d > k), ported from docs/protocol.md, gives
    every committed payload without ``longitudinal``."""
    checked = 0
    for case in committed["ss"]["cases"]:
        config = case["config"]
        if "longitudinal" in config:
            continue
        words = _Words(bytes.fromhex(case["words_key"]))
        threshold = _mechanism(config)._include_threshold
        row = _ss(words, config["k"], config["d"], threshold, case["value"])
        assert _bits(row) == case["payload"], case["value"]
        checked += 1
    assert checked == 5


def test_a_port_of_blh_reproduces_the_vectors(committed: dict[str, Any]) -> None:
    """BLH is local hashing with g = 2 (no uniform other: the flipped bucket), ported from
    docs/protocol.md; every committed payload without ``longitudinal``."""
    checked = 0
    for case in committed["blh"]["cases"]:
        config = case["config"]
        if "longitudinal" in config:
            continue
        words = _Words(bytes.fromhex(case["words_key"]))
        threshold = _mechanism(config)._keep_threshold
        seed, y = _local_hashing(words, case["value"], 2, threshold)
        assert {"seed": f"{seed:016x}", "y": y} == case["payload"]
        checked += 1
    assert checked == 3


def test_a_port_of_onebitmean_reproduces_the_vectors(committed: dict[str, Any]) -> None:
    """dBitFlip's one-bit mean (alpha-point rounding and the point's bit from the keyed source,
    the flip from the words; or, unmemoized, Duchi's kernel then the flip), ported from
    docs/protocol.md, gives every committed payload."""
    for case in committed["onebitmean"]["cases"]:
        config = case["config"]
        mechanism = _mechanism(config)
        lower, upper = float(config["lower"]), float(config["upper"])
        half = (upper - lower) / 2.0
        t = min(max((float(case["value"]) - (lower + half)) / half, -1.0), 1.0)
        words = _Words(bytes.fromhex(case["words_key"]))
        low_t, high_t = mechanism.kernel.low_threshold, mechanism.kernel.high_threshold
        if config["memoize"]:
            buckets = config["buckets"]
            position = (t + 1.0) / 2.0 * buckets
            low = min(math.floor(position), buckets - 1)
            alpha = float(_memo_words(case, "onebitmean/alpha", 0).take(1)[0]) / 2.0**64
            point = low + (position - low > alpha)
            threshold = low_t + point * (high_t - low_t) // buckets
            bit = int(_memo_words(case, "onebitmean/bit", point).take(1)[0] < threshold)
        else:
            side = _round(words, (t + 1.0) / 2.0, 1)
            bit = int(words.take(1)[0] < (high_t if side == 1 else low_t))
        flip = mechanism._flip_threshold
        if flip:
            bit ^= words.take(1)[0] < flip
        assert bit == case["payload"], (config, case["value"])


# ---- rappor (docs/protocol.md, "Strings")


def _scope(case: dict[str, Any]) -> str:
    """The campaign's memo scope: config_id({"campaign", "mechanism"}) (docs/protocol.md)."""
    content = {"campaign": case["campaign"], "mechanism": case["config"]}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def _hmac_drbg(seed: bytes, n: int) -> bytes:
    """n bytes of HMAC_DRBG-SHA256 seeded with ``seed``, no final update (docs/protocol.md)."""

    def mac(key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, hashlib.sha256).digest()

    key, v = b"\x00" * 32, b"\x01" * 32
    key = mac(key, v + b"\x00" + seed)
    v = mac(key, v)
    key = mac(key, v + b"\x01" + seed)
    v = mac(key, v)
    out = b""
    while len(out) < n:
        v = mac(key, v)
        out += v
    return out[:n]


def test_a_port_of_rappor_reproduces_the_vectors(committed: dict[str, Any]) -> None:
    """RAPPOR (the cohort from the keyed source, MD5 Bloom bits, the PRR from HMAC or
    HMAC_DRBG under the raw device secret, the IRR from the words), ported from
    docs/protocol.md, gives every committed payload."""
    for case in committed["rappor"]["cases"]:
        config = case["config"]
        k, h, m = config["k"], config["h"], config["m"]
        mechanism = _mechanism(config)
        secret = bytes.fromhex(case["device_secret"])
        cohort = _memo_words(case, "rappor-cohort", 0).below(m) if m > 1 else 0
        raw = case["value"].encode()
        digest = hashlib.md5(cohort.to_bytes(4, "big") + raw).digest()
        bloom = sum({1 << (digest[i] % k) for i in range(h)})
        message = b"\x01" + _scope(case).encode() + bloom.to_bytes(4 if k <= 32 else k // 8, "big")
        if k <= 32:
            stream = hmac.new(secret, message, hashlib.sha256).digest()
        else:
            stream = _hmac_drbg(secret + message, max(k, 32))
        prr = [
            bool(stream[i] & 1) if stream[i] >> 1 < mechanism.f_times_128 else bool(bloom >> i & 1)
            for i in range(k)
        ]
        p_threshold, q_threshold = mechanism._irr_thresholds
        words = _Words(bytes.fromhex(case["words_key"]))
        p_bits, q_bits = words.lazy(p_threshold, k), words.lazy(q_threshold, k)
        irr = [q if bit else p for bit, p, q in zip(prr, p_bits, q_bits, strict=True)]
        bits = "".join("1" if irr[i] else "0" for i in reversed(range(k)))
        assert {"bits": bits, "cohort": cohort} == case["payload"], case["value"]


def _floyd(words: _Words, d: int, k: int) -> list[int]:
    """sample_subsets(1, d, k): Floyd's algorithm, one uniform_below word per step, sorted."""
    chosen: list[int] = []
    for j in range(d - k, d):
        r = words.below(j + 1)
        chosen.append(j if r in chosen else r)
    return sorted(chosen)


def test_a_port_of_unmemoized_dbitflip_reproduces_the_vectors(committed: dict[str, Any]) -> None:
    """dBitFlip with ``"memoize": false`` (buckets by Floyd's algorithm, then d words, all from
    the report's words), ported from docs/protocol.md."""
    checked = 0
    for case in committed["dbitflip"]["cases"]:
        config = case["config"]
        if config["memoize"]:
            continue
        words = _Words(bytes.fromhex(case["words_key"]))
        buckets = _floyd(words, config["k"], config["d"])
        high, low = _mechanism(config)._thresholds
        bits = [
            w < (high if b == case["value"] else low)
            for w, b in zip(words.take(config["d"]), buckets, strict=True)
        ]
        assert {"buckets": buckets, "bits": _bits(bits)} == case["payload"], case["value"]
        checked += 1
    assert checked == 2


def test_a_port_of_the_vector_numeric_kernels_reproduces_the_vectors(
    committed: dict[str, Any],
) -> None:
    """Duchi, Piecewise and Hybrid on vectors (the sampled coordinate by Floyd's algorithm, then
    the scalar kernel on it), ported from docs/protocol.md."""
    checked = 0
    for name in ("duchi", "piecewise", "hybrid"):
        for case in committed[name]["cases"]:
            config = case["config"]
            if config.get("dim") is None:
                continue
            mechanism = _mechanism(config)
            assert mechanism.sampled_coordinates == 1  # the vectors' case: one coordinate
            lower, upper = float(config["lower"]), float(config["upper"])
            half = (upper - lower) / 2.0
            words = _Words(bytes.fromhex(case["words_key"]))
            (coordinate,) = _floyd(words, config["dim"], 1)
            x = float(case["value"][coordinate])
            t = min(max((x - (lower + half)) / half, -1.0), 1.0)
            kernel = mechanism.kernel
            if name == "duchi":
                output = _duchi(words, kernel, t)
            elif name == "piecewise":
                output = _piecewise(words, kernel, t)
            elif words.take(1)[0] < kernel.alpha_threshold:
                output = _piecewise(words, kernel.piecewise, t)
            else:
                output = kernel.piecewise.output_size + _duchi(words, kernel.duchi, t)
            assert [[coordinate, output]] == case["payload"], name
            checked += 1
    assert checked == 3


def test_a_port_of_memoized_unary_encoding_reproduces_the_vectors(
    committed: dict[str, Any],
) -> None:
    """SUE and OUE under ``longitudinal``: the permanent row (the inner oracle at
    epsilon_permanent, every word from the keyed source of ("value", v)), then every bit flipped
    by ``bernoulli_lazy(2**64 - T, k)`` from the report's words (docs/protocol.md)."""
    checked = 0
    for name in ("sue", "oue"):
        for case in committed[name]["cases"]:
            config = case["config"]
            if "longitudinal" not in config:
                continue
            memoized = _mechanism(config)
            k, v = config["k"], case["value"]
            p, q = memoized.inner._thresholds
            keyed = _memo_words(case, "value", v)
            bits = keyed.lazy(q, k)
            bits[v] = keyed.lazy(p, 1)[0]
            words = _Words(bytes.fromhex(case["words_key"]))
            flips = words.lazy(2**64 - memoized._chain.threshold, k)
            assert _bits([b != f for b, f in zip(bits, flips, strict=True)]) == case["payload"]
            checked += 1
    assert checked == 4


def _local_hashing(words: _Words, x: int, g: int, threshold: int) -> tuple[int, int]:
    """Local hashing's (seed, y) (docs/protocol.md, blh/olh): no uniform other when g = 2."""
    prime = 2**31 - 1
    seed = words.below((prime - 1) * prime)
    hashed = g * (((seed // prime + 1) * x + seed % prime) % prime) // prime
    return seed, _keep_or_other(words, hashed, g, threshold)


def _keep_or_other(words: _Words, value: int, size: int, threshold: int) -> int:
    """keep_or_other: a keep word, then (size > 2) a uniform other skipping the value."""
    keep = words.take(1)[0] < threshold
    if size == 2:
        return value if keep else 1 - value
    other = words.below(size - 1)
    return value if keep else other + (other >= value)


def test_a_port_of_memoized_local_hashing_hr_and_ss_reproduces_the_vectors(
    committed: dict[str, Any],
) -> None:
    """BLH and OLH under ``longitudinal`` (the permanent (seed, y) from the keyed source, then
    randomized response over [g] on y), and HR and SS (the mixture chain: keep word, a fresh
    value and its report, the permanent one when kept), ported from docs/protocol.md."""
    checked = 0
    for name in ("blh", "olh", "hr", "ss"):
        for case in committed[name]["cases"]:
            config = case["config"]
            if "longitudinal" not in config:
                continue
            memoized = _mechanism(config)
            inner, chain, v = memoized.inner, memoized._chain, case["value"]
            keyed = _memo_words(case, "value", v)
            words = _Words(bytes.fromhex(case["words_key"]))
            if name == "hr":
                permanent = _port(inner.to_config(), v, keyed)
                keep = words.take(1)[0] < chain.threshold
                fresh = _port(inner.to_config(), words.below(config["k"]), words)
                assert (permanent if keep else fresh) == case["payload"]
            elif name == "ss":
                k, d, include = config["k"], config["d"], inner._include_threshold
                permanent_row = _ss(keyed, k, d, include, v)
                keep = words.take(1)[0] < chain.threshold
                fresh_row = _ss(words, k, d, include, words.below(k))
                assert _bits(permanent_row if keep else fresh_row) == case["payload"]
            else:
                g = inner.buckets
                seed, y = _local_hashing(keyed, v, g, inner._keep_threshold)
                y = _keep_or_other(words, y, g, chain.threshold)
                assert {"seed": f"{seed:016x}", "y": y} == case["payload"], name
            checked += 1
    assert checked == 8


# ---- formulas the page writes out (docs/protocol.md, "Derived parameters")


def _total_variance(p: float, q: float, k: int) -> float:
    """k q(1-q)/(p-q)^2 + (1-p-q)/(p-q): a pure oracle's total variance at n = 1 (Wang et al.,
    USENIX Security 2017)."""
    return k * q * (1 - q) / (p - q) ** 2 + (1 - p - q) / (p - q)


def test_hierarchical_level_oracles_follow_the_written_variance_rule(
    committed: dict[str, dict[str, Any]],
) -> None:
    """Each level's GRR-or-OUE choice, from the page's formula, is the SDK's on every config."""
    checked = 0
    names = set()
    for case in committed["hierarchical"]["cases"]:
        config = case["config"]
        if config.get("variant") == "haar":
            continue
        sdk = _mechanism(config)
        e = math.exp(config["epsilon"])
        for level, oracle in enumerate(sdk.oracles, start=1):
            size = sdk.b**level
            grr = _total_variance(e / (e + size - 1), 1 / (e + size - 1), size)
            oue = _total_variance(0.5, 1 / (e + 1), size)
            assert oracle.name == ("grr" if grr <= oue else "oue"), (config, level)
            names.add(oracle.name)
            checked += 1
    assert checked == 9
    assert names == {"grr", "oue"}  # both branches of the rule are exercised


def _log_phi(x: float) -> float:
    """log Phi(x) as the page writes it (the two branches the vector configs reach)."""
    if x > 0.0:
        return math.log1p(-0.5 * math.erfc(x / math.sqrt(2.0)))
    assert x > -20.0
    return math.log(0.5 * math.erfc(-x / math.sqrt(2.0)))


def _analytic_delta(s: float, eps: float, d: float) -> float:
    """Balle & Wang (ICML 2018), Theorem 8: Phi(d/2s - eps s/d) - e^eps Phi(-d/2s - eps s/d)."""
    log_a = _log_phi(d / (2 * s) - eps * s / d)
    exponent = eps + _log_phi(-d / (2 * s) - eps * s / d) - log_a
    return 0.0 if exponent >= 0.0 else math.exp(log_a) * -math.expm1(exponent)


def _analytic_sigma(eps: float, delta: float, d: float) -> float:
    """The page's search: double from d until it holds, halve while it holds, then bisect."""
    holds = lambda s: _analytic_delta(s, eps, d) <= delta  # noqa: E731
    high = d
    while not holds(high):
        high *= 2.0
    low = high / 2.0
    while holds(low):
        high, low = low, low / 2.0
    while high - low > 1e-12 * high:
        middle = 0.5 * (low + high)
        if middle <= low or middle >= high:
            break
        if holds(middle):
            high = middle
        else:
            low = middle
    return high


def test_gaussian_sigma_follows_the_written_calibration(
    committed: dict[str, dict[str, Any]],
) -> None:
    """The page's analytic calibration gives the SDK's sigma, bit for bit, on every config."""
    checked = 0
    for case in committed["gaussian"]["cases"]:
        config = case["config"]
        assert config["calibration"] == "analytic"
        d = 2 * config["clip_norm"] if "dim" in config else config["upper"] - config["lower"]
        sigma = _analytic_sigma(config["epsilon"], config["delta"], d)
        assert sigma == _mechanism(config).sigma, config
        assert _analytic_delta(sigma, config["epsilon"], d) <= config["delta"]
        checked += 1
    assert checked == 7


def test_the_memoized_sketches_port_reproduces_the_vectors(
    committed: dict[str, dict[str, Any]],
) -> None:
    """CMS and HCMS under ``longitudinal``, ported from docs/protocol.md: the device's row (and
    column) from the keyed source, the permanent flips from the string's memo stream, then
    every sign flipped again from the case's words with probability 1 - p2."""
    checked = 0
    for name in ("cms", "hcms"):
        for case in committed[name]["cases"]:
            config = case["config"]
            if "longitudinal" not in config:
                continue
            mechanism = _mechanism(config)
            m, hashes = config["m"], config["hashes"]
            raw = case["value"].encode()
            raw = raw if len(raw) <= config["max_length"] else b"\xff"
            key = b"ldp-telemetry/sketch/v1" + config["seed"].to_bytes(8, "big")
            digest = hashlib.blake2b(raw, digest_size=4 * hashes, key=key).digest()
            row = _memo_words(case, f"{name}:row", 0).below(hashes) if hashes > 1 else 0
            bucket = int.from_bytes(digest[4 * row : 4 * row + 4], "little") & (m - 1)
            stream = _memo_words(case, f"string:{raw.hex()}", 0)
            words = _Words(bytes.fromhex(case["words_key"]))
            again = 2**64 - mechanism._keep_threshold
            if name == "cms":
                flips = stream.lazy(mechanism.permanent._flip_threshold, m)
                flips[bucket] = not flips[bucket]
                bits = [b != f for b, f in zip(flips, words.lazy(again, m), strict=True)]
                assert {"row": row, "bits": _bits(bits)} == case["payload"], case["value"]
            else:
                column = _memo_words(case, "hcms:column", 0).below(m) if m > 1 else 0
                plus = bin(bucket & column).count("1") % 2 == 0
                sign = plus != stream.lazy(mechanism.permanent._flip_threshold, 1)[0]
                sign = sign != words.lazy(again, 1)[0]
                assert (row * m + column) * 2 + sign == case["payload"], case["value"]
            checked += 1
    assert checked == 2


def test_the_memoized_pem_port_reproduces_the_vectors(committed: dict[str, dict[str, Any]]) -> None:
    """PEM under ``longitudinal``, ported from docs/protocol.md: the device's level as plain
    PEM's, the permanent (seed, y) of PEM at epsilon_permanent drawn from the string's stream
    ``pem:string:<hex>``, then randomized response over [g] on y from the case's words."""
    checked = 0
    for case in committed["pem"]["cases"]:
        if "longitudinal" not in case["config"]:
            continue
        mechanism = _mechanism(case["config"])
        stream = _memo_words(case, "pem:string:" + bytes(_pem_raw(case)).hex(), 0)
        permanent = _pem(case, stream, mechanism.permanent._keep_threshold)
        words = _Words(bytes.fromhex(case["words_key"]))
        g = case["config"]["g"]
        permanent["y"] = _keep_or_other(words, permanent["y"], g, mechanism._again_threshold)
        assert permanent == case["payload"], case["value"]
        checked += 1
    assert checked == 1


def _pem_raw(case: dict[str, Any]) -> bytes:
    """The string's bytes as its memo label names them: UTF-8, or the reserved 0xFF."""
    config, value = case["config"], case["value"]
    raw = value.encode()
    alphabet = config.get("alphabet")
    if alphabet is None:
        return raw if len(raw) <= config["max_length"] else b"\xff"
    fits = len(value) <= config["max_length"] and all(c in alphabet for c in value)
    return raw if fits else b"\xff"


def test_the_memoized_sfp_port_reproduces_the_vectors(committed: dict[str, dict[str, Any]]) -> None:
    """SFP under ``longitudinal``, ported from docs/protocol.md: the offset from the keyed
    source; the word part memoized HCMS under the labels ``sfp/word/...``; the fragment part
    memoized Hadamard response (the mixture chain); the instantaneous words word part first."""
    checked = 0
    for case in committed["sfp"]["cases"]:
        config = case["config"]
        if "longitudinal" not in config:
            continue
        mechanism = _mechanism(config)
        sketch, oracle = mechanism.word_sketch, mechanism.fragment_oracle
        m, hashes, max_length = config["m"], config["hashes"], config["max_length"]
        raw = case["value"].encode()
        raw = raw if len(raw) <= max_length else b"\xff"
        seed = config["seed"].to_bytes(8, "big")
        offset = _memo_words(case, "sfp:offset", 0).below(max_length) if max_length > 1 else 0
        row = _memo_words(case, "sfp/word/hcms:row", 0).below(hashes) if hashes > 1 else 0
        column = _memo_words(case, "sfp/word/hcms:column", 0).below(m)
        key = b"ldp-telemetry/sketch/v1" + seed
        digest = hashlib.blake2b(raw, digest_size=4 * hashes, key=key).digest()
        bucket = int.from_bytes(digest[4 * row : 4 * row + 4], "little") & (m - 1)
        plus = bin(bucket & column).count("1") % 2 == 0
        stream = _memo_words(case, f"sfp/word/string:{raw.hex()}", 0)
        sign = plus != stream.lazy(sketch.permanent._flip_threshold, 1)[0]
        tag_key = b"ldp-telemetry/sfp-tag/v1" + seed
        tag = hashlib.blake2b(raw, digest_size=1, key=tag_key).digest()[0]
        fragment = 256 * tag + raw.ljust(max_length, b"\x00")[offset]
        inner = oracle.inner.to_config()
        permanent = _port(inner, fragment, _memo_words(case, "value", fragment))
        words = _Words(bytes.fromhex(case["words_key"]))
        sign = sign != words.lazy(2**64 - sketch._keep_threshold, 1)[0]
        keep = words.take(1)[0] < oracle._chain.threshold
        fresh = _port(inner, words.below(65536), words)
        assert {
            "fragment": permanent if keep else fresh,
            "offset": offset,
            "word": (row * m + column) * 2 + sign,
        } == case["payload"], case["value"]
        checked += 1
    assert checked == 1
