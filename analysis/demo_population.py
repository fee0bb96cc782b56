"""Simulated populations for ``ldp-demo --collector``: raw values for every kind of campaign,
and the truth an estimate of them should find.

A simulation, not device randomness: a seeded NumPy generator is right here. Each kind gets a
population its estimate can be checked against:

* categories (``grr``, ``olh``, ...): a Zipf over the domain's labels; ``hierarchical`` (ranges)
  a discretized lognormal over its ordered domain;
* strings (``pem``, ``sfp``, ``cms``, ``hcms``, ``rappor``): a Zipf over generated words that fit
  the mechanism's ``max_length`` and ``alphabet``, or the lines of a file (``--values``);
* several attributes (``multi``, ``fourier``): each attribute a Zipf over its labels, correlated
  with the first attribute (``correlation``: the chance an attribute copies it);
* key-value (``pckv``): keys with Zipf frequencies, each key's values around its own mean in
  [-1, 1];
* numbers: a Beta(2, 5) on the mechanism's range; ``square_wave`` (distributions) a lognormal
  clipped to it.
"""

from __future__ import annotations

import dataclasses
import string
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

ZIPF_EXPONENT = 1.1
WORDS = 40
"""How many distinct words a simulated string population holds."""
TRUTH_ROWS = 10
"""How many truth rows a long list (labels, words, keys) shows: the most frequent."""


@dataclasses.dataclass(frozen=True)
class Population:
    """The simulated devices' raw values and the truth an estimate should find.

    ``truth``: ``(quantity, value)`` rows; a quantity is named as the estimate names it
    (``frequency of 'dark'``, ``mean``, ``key 3 mean``, ``os = 'android'``)."""

    kind: str
    values: list[Any]
    truth: list[tuple[str, float]]

    def truth_lines(self) -> list[str]:
        """The truth, one quantity a line."""
        width = max((len(name) for name, _ in self.truth), default=0)
        return [f"  {name:<{width}}  {value:.4f}" for name, value in self.truth]


def zipf_population(
    devices: int, labels: int, *, seed: int, exponent: float = ZIPF_EXPONENT
) -> npt.NDArray[np.int64]:
    """Each device's value: index ``i`` with probability proportional to ``1/(i+1)**exponent``."""
    weights = 1.0 / np.arange(1, labels + 1, dtype=np.float64) ** exponent
    rng = np.random.default_rng(seed)
    return rng.choice(labels, size=devices, p=weights / weights.sum()).astype(np.int64)


def generated_words(count: int, *, max_length: int, alphabet: str | None, seed: int) -> list[str]:
    """``count`` distinct pronounceable-looking words of 3 to ``max_length`` characters drawn
    from ``alphabet`` (lower-case letters when it allows them, else its own characters)."""
    letters = alphabet if alphabet else string.ascii_lowercase
    pool = [c for c in letters if c in string.ascii_lowercase] or list(letters)
    rng = np.random.default_rng(seed)
    low, high = min(3, max_length), max(min(8, max_length), min(3, max_length))
    distinct = len(set(pool)) ** low
    if distinct < count:
        raise ValueError(
            f"the mechanism's alphabet and max_length {max_length} allow only {distinct} words; "
            f"give --values FILE"
        )
    words: dict[str, None] = {}
    while len(words) < count:
        length = int(rng.integers(low, high + 1))
        words["".join(rng.choice(pool, size=length))] = None
    return list(words)


def read_values(path: str) -> list[str]:
    """One value a line (empty lines skipped); ``ValueError`` naming the file when it has none."""
    with open(path, encoding="utf-8") as handle:
        lines = [line.rstrip("\n") for line in handle]
    values = [line for line in lines if line]
    if not values:
        raise ValueError(f"--values {path!r}: the file has no values (one a line)")
    return values


def simulate(
    mechanism: Any,
    domain: Sequence[str] | None,
    devices: int,
    *,
    seed: int,
    values: Sequence[str] | None = None,
    correlation: float = 0.5,
) -> Population:
    """``devices`` raw values for a campaign of ``mechanism`` (module docstring), and the truth.

    ``values``: a string campaign's population is these values, one a device in turn (a file's
    lines), instead of generated words."""
    rng = np.random.default_rng(seed)
    if values is not None and mechanism.value_kind != "string":
        raise ValueError(
            f"--values: campaign mechanism {mechanism.name!r} does not take strings; "
            "--values FILE is for string campaigns (pem, sfp, cms, hcms, rappor)"
        )
    if mechanism.value_kind == "string":
        return _strings(mechanism, devices, seed=seed, values=values)
    by_kind = _BY_KIND.get(mechanism.estimate_kind)
    if by_kind is not None:
        return by_kind(mechanism, domain, devices, rng=rng, seed=seed, correlation=correlation)
    if mechanism.value_kind == "record":
        return _attributes(mechanism, devices, seed=seed, correlation=correlation)
    if mechanism.value_kind == "number":
        return _numbers(mechanism, devices, rng=rng)
    if not domain:
        raise ValueError(
            f"campaign mechanism {mechanism.name!r} has no domain to draw simulated values from"
        )
    return _labels(domain, zipf_population(devices, len(domain), seed=seed), "categories")


def _labels(domain: Sequence[Any], index: Any, kind: str) -> Population:
    devices = len(index)
    counts = np.bincount(index, minlength=len(domain)) / devices
    order = np.argsort(-counts, kind="stable")[:TRUTH_ROWS]
    truth = [(f"frequency of {domain[i]!r}", float(counts[i])) for i in order]
    return Population(kind, [domain[i] for i in index], truth)


def _strings(
    mechanism: Any, devices: int, *, seed: int, values: Sequence[str] | None
) -> Population:
    if values is not None:
        population = [values[i % len(values)] for i in range(devices)]
    else:
        max_length = int(getattr(mechanism, "max_length", 8))
        words = generated_words(
            WORDS, max_length=max_length, alphabet=getattr(mechanism, "alphabet", None), seed=seed
        )
        population = [words[i] for i in zipf_population(devices, len(words), seed=seed)]
    counts = Counter(population).most_common(TRUTH_ROWS)
    truth = [(f"frequency of {word!r}", count / devices) for word, count in counts]
    return Population("strings", population, truth)


def _attributes(
    mechanism: Any, devices: int, *, seed: int, correlation: float, joint_truth: bool = False
) -> Population:
    attributes = list(mechanism.attributes.items)
    rng = np.random.default_rng(seed + 1)
    first = zipf_population(devices, attributes[0][1], seed=seed)
    columns = [first]
    for position, (_, k, _) in enumerate(attributes[1:], start=1):
        own = zipf_population(devices, k, seed=seed + position + 1)
        copies = rng.random(devices) < correlation
        columns.append(np.where(copies, first % k, own))
    records = []
    for row in zip(*columns, strict=True):
        records.append(
            {
                name: (int(i) if labels is None else labels[int(i)])
                for (name, _, labels), i in zip(attributes, row, strict=True)
            }
        )
    truth = []
    if joint_truth:
        # Fourier estimates joint tables: the truth is the first two attributes' joint cells.
        (first_name, _, _), (second_name, _, _) = attributes[0], attributes[1]
        joint = np.bincount(columns[0] * 2 + columns[1], minlength=4) / devices
        for cell, share in enumerate(joint):
            truth.append((f"{first_name}, {second_name} = {cell // 2}, {cell % 2}", float(share)))
        return Population("attributes", records, truth)
    for (name, k, labels), column in zip(attributes, columns, strict=True):
        shares = np.bincount(column, minlength=k) / devices
        for i in np.argsort(-shares, kind="stable")[: max(2, TRUTH_ROWS // len(attributes))]:
            label = int(i) if labels is None else labels[int(i)]
            truth.append((f"{name} = {label!r}", float(shares[i])))
    return Population("attributes", records, truth)


def _key_values(mechanism: Any, devices: int, *, rng: np.random.Generator, seed: int) -> Population:
    k, padding = int(mechanism.k), int(mechanism.padding)
    means = np.linspace(-0.8, 0.8, k)
    weights = 1.0 / np.arange(1, k + 1, dtype=np.float64) ** ZIPF_EXPONENT
    weights /= weights.sum()
    records: list[dict[int, float]] = []
    held = np.zeros(k)
    sums = np.zeros(k)
    sizes = rng.integers(1, padding + 1, size=devices)  # never more pairs than padding: unbiased
    for size in sizes:
        keys = rng.choice(k, size=int(size), replace=False, p=weights)
        record = {}
        for key in keys:
            value = float(np.clip(means[key] + rng.normal(0.0, 0.2), -1.0, 1.0))
            record[int(key)] = value
            held[key] += 1
            sums[key] += value
        records.append(record)
    truth = []
    for key in np.argsort(-held, kind="stable")[:TRUTH_ROWS]:
        truth.append((f"key {int(key)} frequency", float(held[key] / devices)))
        truth.append((f"key {int(key)} mean", float(sums[key] / max(held[key], 1))))
    return Population("key-value", records, truth)


def _numbers(mechanism: Any, devices: int, *, rng: np.random.Generator) -> Population:
    lower, upper = float(mechanism.lower), float(mechanism.upper)
    dim = getattr(mechanism, "dim", None)
    if dim is not None:
        vectors = lower + (upper - lower) * rng.beta(2.0, 5.0, size=(devices, int(dim)))
        truth = [(f"mean of coordinate {j}", float(m)) for j, m in enumerate(vectors.mean(axis=0))]
        return Population("numbers", [list(v) for v in vectors], truth)
    numbers = lower + (upper - lower) * rng.beta(2.0, 5.0, size=devices)
    return Population("numbers", list(numbers), [("mean", float(numbers.mean()))])


def _ranges(
    mechanism: Any,
    domain: Sequence[Any] | None,
    devices: int,
    *,
    rng: np.random.Generator,
    seed: int,
    correlation: float,
) -> Population:
    """A discretized lognormal over the ordered domain: a skewed distribution to find ranges in."""
    if not domain:
        raise ValueError(
            f"campaign mechanism {mechanism.name!r} has no domain to draw simulated values from"
        )
    raw = rng.lognormal(mean=0.0, sigma=0.6, size=devices)
    index = np.clip((raw / 4.0 * len(domain)).astype(np.int64), 0, len(domain) - 1)
    return _labels(domain, index, "ranges")


def _distribution(
    mechanism: Any,
    domain: Sequence[Any] | None,
    devices: int,
    *,
    rng: np.random.Generator,
    seed: int,
    correlation: float,
) -> Population:
    """A lognormal clipped to the range: a skewed distribution with a median below its mean."""
    lower, upper = float(mechanism.lower), float(mechanism.upper)
    raw = rng.lognormal(mean=0.0, sigma=0.5, size=devices)
    numbers = np.clip(lower + (upper - lower) * raw / 4.0, lower, upper)
    truth = [("mean", float(numbers.mean())), ("median", float(np.median(numbers)))]
    return Population("distribution", list(numbers), truth)


def _joint_attributes(
    mechanism: Any,
    domain: Sequence[Any] | None,
    devices: int,
    *,
    rng: np.random.Generator,
    seed: int,
    correlation: float,
) -> Population:
    return _attributes(mechanism, devices, seed=seed, correlation=correlation, joint_truth=True)


def _key_value_records(
    mechanism: Any,
    domain: Sequence[Any] | None,
    devices: int,
    *,
    rng: np.random.Generator,
    seed: int,
    correlation: float,
) -> Population:
    return _key_values(mechanism, devices, rng=rng, seed=seed)


_BY_KIND: dict[str, Callable[..., Population]] = {
    "key-value": _key_value_records,
    "range": _ranges,
    "fourier": _joint_attributes,
    "distribution": _distribution,
}
"""Populations by ``Mechanism.estimate_kind`` where a kind needs its own (a table by kind, as
``analysis.kinds.KINDS`` is; every other campaign draws by its value kind)."""
