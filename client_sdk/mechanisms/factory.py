"""Building a mechanism from its config: the one place that knows ``auto`` and ``longitudinal``.

``mechanism_from_config`` dispatches, in this order: a config carrying ``"longitudinal"`` is a
memoized frequency oracle (:func:`memoized_from_config`); ``{"mechanism": "auto"}`` is the
selection of ``client_sdk.mechanisms.auto``; any other name is looked up in the registry and
built by its class's ``from_config``. Errors are ``ValueError`` naming the field and the value;
a config's epsilon is refused below ``MIN_EPSILON`` here, for every mechanism at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from client_sdk.mechanisms import auto
from client_sdk.mechanisms._validation import (
    MIN_EPSILON,
    check_config_epsilon,
    check_config_keys,
    check_epsilon,
)
from client_sdk.mechanisms.base import FrequencyOracle, Mechanism
from client_sdk.mechanisms.memoized_oracle import LONGITUDINAL_FIELD, Memoized
from client_sdk.mechanisms.registry import MECHANISMS, mechanism_class

__all__ = ["below_epsilon_floor", "mechanism_from_config", "memoized_from_config"]


def mechanism_from_config(config: Mapping[str, Any], *, stored: bool = False) -> Mechanism:
    """Build the mechanism a config describes; ``ValueError`` naming the field on bad input.

    ``stored``: a config a collector already stored, read as it was stored. The epsilon floor
    (``MIN_EPSILON``) is then not applied, so a campaign created before it still lists and
    serves; its estimates are refused (``below_epsilon_floor``)."""
    _check_mapping(config)
    if "mechanism" not in config:
        raise ValueError("config is missing the field 'mechanism'")
    if "epsilon" in config and not stored:  # the floor of every config (MIN_EPSILON), once
        check_config_epsilon(config["epsilon"])
    if LONGITUDINAL_FIELD in config:
        return memoized_from_config(config, stored=stored)
    name = config["mechanism"]
    if name == auto.AUTO:
        check_config_keys(config, name=auto.AUTO, required={"epsilon", "k"}, optional=set())
        return auto.select(config["epsilon"], config["k"])
    return _registered(name).from_config(config)


def memoized_from_config(config: Mapping[str, Any], *, stored: bool = False) -> Mechanism:
    """Build the memoized mechanism of a config carrying ``"longitudinal"``.

    A string mechanism (cms, hcms, pem, sfp) is built as its ``longitudinal_variant()`` (keyed
    by the string: client_sdk/mechanisms/strings.py).

    ``{"mechanism": "auto", ...}`` picks, among the registered candidates, the one whose
    *composed* channel has the least exact total error at these (epsilon, E); candidates whose
    chain carries a deterministic pseudonym (blh, olh: L-LH's hash seed) only when
    ``longitudinal.allow_pseudonym`` is true (docs/math/memoization.md).
    """
    _check_mapping(config)
    settings = config.get(LONGITUDINAL_FIELD)
    if not isinstance(settings, Mapping):
        raise ValueError(
            f'longitudinal must be an object {{"epsilon_permanent": E}}; got {settings!r}'
        )
    unknown = sorted(set(settings) - {"epsilon_permanent", "allow_pseudonym"})
    if unknown:
        raise ValueError(f"longitudinal has unknown field(s) {', '.join(map(str, unknown))}")
    if "epsilon_permanent" not in settings:
        raise ValueError("longitudinal is missing epsilon_permanent")
    permanent = check_epsilon(settings["epsilon_permanent"], "longitudinal.epsilon_permanent")
    allow_pseudonym = settings.get("allow_pseudonym", False)
    if not isinstance(allow_pseudonym, bool):
        raise ValueError(
            f"longitudinal.allow_pseudonym must be true or false; got {allow_pseudonym!r}"
        )
    if "epsilon" not in config:
        raise ValueError("config is missing the field 'epsilon'")
    epsilon = (
        check_epsilon(config["epsilon"]) if stored else check_config_epsilon(config["epsilon"])
    )
    if permanent < epsilon:
        raise ValueError(
            f"longitudinal.epsilon_permanent must be >= epsilon (one report can never reveal "
            f"more than all reports); got {permanent!r} < {epsilon!r}"
        )
    name: Any = config.get("mechanism")
    inner_config = {key: value for key, value in config.items() if key != LONGITUDINAL_FIELD}
    inner_config["epsilon"] = permanent
    if name == auto.AUTO:
        return _select_memoized(inner_config, epsilon, allow_pseudonym=allow_pseudonym)
    cls = _registered(name)
    if cls.memoizes_itself:
        raise ValueError(f"{name!r} has its own memoization; it cannot take 'longitudinal'")
    variant = getattr(cls, "longitudinal_variant", None)
    if variant is not None:  # a string mechanism: its own memoized class (strings.py)
        if "allow_pseudonym" in settings:
            raise ValueError(
                f"longitudinal.allow_pseudonym applies to 'auto' over frequency oracles, not to "
                f"{name!r}"
            )
        plain = {key: value for key, value in inner_config.items() if key != "epsilon"}
        return variant().from_config({**plain, "epsilon": epsilon, "epsilon_permanent": permanent})
    if not issubclass(cls, FrequencyOracle):
        reason = getattr(cls, "longitudinal_refusal", None)  # why it has no memoized form
        raise ValueError(
            f"longitudinal applies to frequency oracles; {name!r} is not one"
            + (f" ({reason})" if reason else "")
        )
    shape = cls.resolved_shape
    if shape is not None and inner_config.get(shape) is None:
        best = _best_shape(cls, shape, inner_config, epsilon)
        return dataclasses.replace(best, allow_pseudonym=allow_pseudonym)
    return Memoized(
        inner=cls.from_config(inner_config), epsilon=epsilon, allow_pseudonym=allow_pseudonym
    )


def below_epsilon_floor(mechanism: Mechanism) -> str | None:
    """Why a (stored) mechanism's estimates are refused: its epsilon is below ``MIN_EPSILON``
    (docs/architecture.md, "The epsilon floor"); ``None`` when it is not."""
    epsilon = getattr(mechanism, "epsilon", None)
    if isinstance(epsilon, (int, float)) and epsilon < MIN_EPSILON:
        return (
            f"epsilon {epsilon!r} is below the floor {MIN_EPSILON:g}, where the estimators' "
            "arithmetic stops being exact (the campaign predates the floor): no estimate is "
            "released"
        )
    return None


def _check_mapping(config: Any) -> None:
    if not isinstance(config, Mapping):
        raise ValueError(f"a mechanism config must be a JSON object; got {type(config).__name__}")


def _registered(name: Any) -> type[Mechanism]:
    """The registered class of ``name``; the error lists ``auto`` with the registered names."""
    if not isinstance(name, str) or name not in MECHANISMS:
        known = ", ".join(sorted([*MECHANISMS, auto.AUTO]))
        raise ValueError(f"mechanism must be one of {known}; got {name!r}")
    return mechanism_class(name)


def _best_shape(
    cls: type[FrequencyOracle], shape: str, inner_config: Mapping[str, Any], epsilon: float
) -> Memoized:
    """Resolve an omitted shape parameter (OLH's g, SS's d, HR's blocks) for the composed chain.

    The mechanism would resolve it for the epsilon it is built at, E, but what one report reveals
    is epsilon: OLH's g = round(e^eps + 1) makes L-LH's composed channel exactly OLH at epsilon.
    Both resolutions are tried and the one with the least exact total error is kept (ties: E's).
    The choice is written into the config, so it round-trips.
    """
    best: Memoized | None = None
    for resolve_at in (inner_config["epsilon"], epsilon):
        value = getattr(cls.from_config({**inner_config, "epsilon": resolve_at}), shape)
        candidate = Memoized(inner=cls.from_config({**inner_config, shape: value}), epsilon=epsilon)
        if best is None or candidate.total_variance() < best.total_variance() * (1 - 1e-12):
            best = candidate
    assert best is not None
    return best


def _select_memoized(
    inner_config: Mapping[str, Any], epsilon: float, *, allow_pseudonym: bool
) -> Memoized:
    """``auto`` under ``longitudinal``: the candidate whose composed channel errs least, among
    those without a deterministic pseudonym unless ``allow_pseudonym``."""
    unknown = sorted(set(inner_config) - {"mechanism", "epsilon", "k"})
    if unknown:
        raise ValueError(f"config for 'auto' has unknown field(s) {', '.join(unknown)}")
    if "k" not in inner_config:
        raise ValueError("config for 'auto' is missing k")

    def build(name: str) -> Memoized:
        candidate = memoized_from_config(
            {
                "mechanism": name,
                "epsilon": epsilon,
                "k": inner_config["k"],
                LONGITUDINAL_FIELD: {"epsilon_permanent": inner_config["epsilon"]},
            }
        )
        assert isinstance(candidate, Memoized)
        if candidate.deterministic_pseudonym and not allow_pseudonym:
            raise ValueError(f"{name}: a deterministic pseudonym, not allowed")  # rank skips it
        return candidate

    chosen = auto.best(build, repr(dict(inner_config)))
    inner = dataclasses.replace(chosen.inner, selected_by=auto.AUTO)
    return Memoized(inner=inner, epsilon=epsilon, allow_pseudonym=allow_pseudonym)
