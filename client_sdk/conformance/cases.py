"""The cases the conformance vectors cover: every mechanism and variant in the registry, with
edge cases (first and last label, numeric range ends and beyond, the longest string, the largest
k), and the memoized (``longitudinal``) variants.

A case is a config and the values to report, one report each; the generator derives each
report's word key (and, where the keyed source is used, its device secret) from the file name and
the case's position, so regenerating gives the same files.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CASES"]

_LONG = {"epsilon_permanent": 4.0}
_BOOLS = [{"name": "a"}, {"name": "b"}, {"name": "c"}]
_MULTI_ATTRS = [
    {"name": "os", "k": 3, "labels": ["android", "ios", "web"]},
    {"name": "theme", "k": 2, "labels": ["light", "dark"]},
    {"name": "size", "k": 4},
]
_MULTI_RECORDS: list[Any] = [
    {"os": "android", "theme": "light", "size": 0},
    {"os": "web", "theme": "dark", "size": 3},
]


def _cat(config: dict[str, Any], k: int) -> list[tuple[dict[str, Any], list[Any]]]:
    """A categorical oracle: first, a middle and the last label; and its memoized variant."""
    values = [0, k // 2, k - 1]
    return [(config, values), ({**config, "longitudinal": _LONG}, [0, k - 1])]


CASES: dict[str, list[tuple[dict[str, Any], list[Any]]]] = {
    "grr": [
        *_cat({"mechanism": "grr", "epsilon": 1.0, "k": 5}, 5),
        ({"mechanism": "grr", "epsilon": 2.0, "k": 1 << 20}, [0, (1 << 20) - 1]),
    ],
    "sue": [*_cat({"mechanism": "sue", "epsilon": 1.0, "k": 9}, 9)],
    "oue": [
        *_cat({"mechanism": "oue", "epsilon": 1.0, "k": 12}, 12),
        ({"mechanism": "oue", "epsilon": 1.0, "k": 1000}, [999]),
    ],
    "ss": [
        *_cat({"mechanism": "ss", "epsilon": 1.0, "k": 10}, 10),
        ({"mechanism": "ss", "epsilon": 0.5, "k": 300, "d": 100}, [0, 299]),
    ],
    "blh": [*_cat({"mechanism": "blh", "epsilon": 1.0, "k": 16}, 16)],
    "olh": [
        *_cat({"mechanism": "olh", "epsilon": 2.0, "k": 16}, 16),
        ({"mechanism": "olh", "epsilon": 3.0, "k": 1 << 20, "g": 64}, [0, (1 << 20) - 1]),
    ],
    "hr": [
        *_cat({"mechanism": "hr", "epsilon": 1.0, "k": 10}, 10),
        ({"mechanism": "hr", "epsilon": 4.0, "k": (1 << 24) - 1, "blocks": 33}, [0, (1 << 24) - 2]),
    ],
    "rappor": [
        (
            {"mechanism": "rappor", "k": 32, "h": 2, "m": 8, "f": 0.25, "p": 0.25, "q": 0.75},
            ["", "a", "home", "x" * 200],
        ),
        (
            {"mechanism": "rappor", "k": 256, "h": 4, "m": 2, "f": 0.5, "p": 0.5, "q": 0.75},
            ["home", "settings"],
        ),
    ],
    "laplace": [
        (
            {"mechanism": "laplace", "epsilon": 1.0, "lower": 0, "upper": 240},
            [0, 120.5, 240, 500, -3],
        ),
        (
            {"mechanism": "laplace", "epsilon": 1.0, "lower": 0, "upper": 240, "granularity": 0.5},
            [0, 240],
        ),
    ],
    "gaussian": [
        (
            {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6, "lower": -1, "upper": 1},
            [-1, 0.25, 1, 7, -7],
        ),
        (
            {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6, "dim": 3, "clip_norm": 1.0},
            [[0.0, 0.0, 0.0], [3.0, -4.0, 0.0]],
        ),
    ],
    "duchi": [
        ({"mechanism": "duchi", "epsilon": 1.0, "lower": 0, "upper": 10}, [0, 5, 10, 11, -1]),
        (
            {"mechanism": "duchi", "epsilon": 1.0, "lower": -1, "upper": 1, "dim": 4},
            [[-1.0, 0.0, 0.5, 1.0]],
        ),
    ],
    "piecewise": [
        ({"mechanism": "piecewise", "epsilon": 1.0, "lower": 0, "upper": 60}, [0, 30, 60, 61, -1]),
        (
            {"mechanism": "piecewise", "epsilon": 2.0, "lower": -1, "upper": 1, "dim": 4},
            [[-1.0, 0.0, 0.5, 1.0]],
        ),
    ],
    "hybrid": [
        ({"mechanism": "hybrid", "epsilon": 1.0, "lower": 0, "upper": 60}, [0, 30, 60, 61, -1]),
        (
            {"mechanism": "hybrid", "epsilon": 2.0, "lower": -1, "upper": 1, "dim": 4},
            [[-1.0, 0.0, 0.5, 1.0]],
        ),
    ],
    "dbitflip": [
        ({"mechanism": "dbitflip", "epsilon": 1.0, "k": 16, "d": 4}, [0, 7, 15]),
        ({"mechanism": "dbitflip", "epsilon": 1.0, "k": 16, "d": 4, "memoize": False}, [0, 15]),
        ({"mechanism": "dbitflip", "epsilon": 2.0, "k": 1 << 20, "d": 2}, [(1 << 20) - 1]),
    ],
    "onebitmean": [
        ({"mechanism": "onebitmean", "epsilon": 1.0, "lower": 0, "upper": 100}, [0, 50, 100, 150]),
        (
            {
                "mechanism": "onebitmean",
                "epsilon": 1.0,
                "lower": 0,
                "upper": 100,
                "buckets": 4,
                "gamma": 0.2,
            },
            [0, 100],
        ),
        (
            {"mechanism": "onebitmean", "epsilon": 1.0, "lower": 0, "upper": 100, "memoize": False},
            [0, 100, -5],
        ),
    ],
    "cms": [
        (
            {"mechanism": "cms", "epsilon": 4.0, "m": 64, "hashes": 4, "max_length": 16},
            ["", "a", "home", "x" * 16, "y" * 17],
        ),
        (
            {
                "mechanism": "cms",
                "epsilon": 4.0,
                "m": 64,
                "hashes": 4,
                "max_length": 16,
                "longitudinal": {"epsilon_permanent": 6.0},
            },
            ["home"],
        ),
    ],
    "hcms": [
        (
            {"mechanism": "hcms", "epsilon": 4.0, "m": 64, "hashes": 4, "max_length": 16},
            ["", "home", "x" * 16, "y" * 17],
        ),
        (
            {
                "mechanism": "hcms",
                "epsilon": 4.0,
                "m": 64,
                "hashes": 4,
                "max_length": 16,
                "longitudinal": {"epsilon_permanent": 6.0},
            },
            ["home"],
        ),
    ],
    "pem": [
        ({"mechanism": "pem", "epsilon": 4.0, "max_length": 4}, ["", "home", "abcd", "abcde"]),
        (
            {
                "mechanism": "pem",
                "epsilon": 4.0,
                "max_length": 6,
                "alphabet": "abcdefghijklmnopqrstuvwxyz",
            },
            ["a", "zzzzzz", "Home"],
        ),
        (
            {
                "mechanism": "pem",
                "epsilon": 4.0,
                "max_length": 4,
                "longitudinal": {"epsilon_permanent": 6.0},
            },
            ["home"],
        ),
    ],
    "sfp": [
        (
            {"mechanism": "sfp", "epsilon": 4.0, "max_length": 8, "m": 256, "hashes": 4},
            ["", "home", "abcdefgh", "abcdefghi"],
        ),
        (
            {
                "mechanism": "sfp",
                "epsilon": 4.0,
                "max_length": 8,
                "m": 256,
                "hashes": 4,
                "longitudinal": {"epsilon_permanent": 6.0},
            },
            ["home"],
        ),
    ],
    "square_wave": [
        (
            {"mechanism": "square_wave", "epsilon": 2.0, "lower": 0, "upper": 8, "bins": 16},
            [0, 4, 8, 9, -1],
        ),
    ],
    "hierarchical": [
        ({"mechanism": "hierarchical", "epsilon": 2.0, "k": 12}, [0, 5, 11]),
        ({"mechanism": "hierarchical", "epsilon": 2.0, "k": 12, "variant": "haar"}, [0, 11]),
        (
            {"mechanism": "hierarchical", "epsilon": 2.0, "k": 1 << 11, "branching": 4},
            [(1 << 11) - 1],
        ),
    ],
    "multi": [
        (
            {"mechanism": "multi", "epsilon": 2.0, "protocol": "spl", "attributes": _MULTI_ATTRS},
            _MULTI_RECORDS,
        ),
        (
            {"mechanism": "multi", "epsilon": 2.0, "protocol": "smp", "attributes": _MULTI_ATTRS},
            _MULTI_RECORDS,
        ),
        (
            {"mechanism": "multi", "epsilon": 2.0, "protocol": "rsfd", "attributes": _MULTI_ATTRS},
            _MULTI_RECORDS,
        ),
        (
            {
                "mechanism": "multi",
                "epsilon": 2.0,
                "protocol": "smp",
                "attributes": _MULTI_ATTRS,
                "marginals": [["os", "theme"], ["theme", "size"]],
                "table_oracles": ["grr", "oue"],
            },
            _MULTI_RECORDS,
        ),
        (
            {
                "mechanism": "multi",
                "epsilon": 2.0,
                "protocol": "smp",
                "attributes": _MULTI_ATTRS,
                "marginals": [["os", "size"]],
                "table_oracles": ["olh"],
            },
            _MULTI_RECORDS,
        ),
    ],
    "fourier": [
        (
            {"mechanism": "fourier", "epsilon": 2.0, "order": 2, "attributes": _BOOLS},
            [{"a": 0, "b": 0, "c": 0}, {"a": 1, "b": 1, "c": 1}],
        ),
    ],
    "pckv": [
        (
            {"mechanism": "pckv", "epsilon": 2.0, "k": 4, "padding": 2},
            [{}, {"0": 1.0}, {"1": 0.25, "3": -1.0}, {"0": 0.5, "1": -0.5, "2": 0.0, "3": 1.0}],
        ),
        (
            {"mechanism": "pckv", "epsilon": 2.0, "k": 4, "padding": 2, "variant": "ue"},
            [{"0": 1.0}, {"1": 0.25, "3": -1.0}],
        ),
        (
            {"mechanism": "pckv", "epsilon": 2.0, "k": 1 << 16, "padding": 1},
            [{str((1 << 16) - 1): 0.75}],
        ),
    ],
}
