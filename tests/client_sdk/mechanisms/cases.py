"""The configurations every frequency-oracle contract test runs against.

Add a mechanism here and it gets the whole contract suite of ``test_frequency_contract.py``:
config and wire round-trips, malformed payloads, validation, exact privacy, goodness of fit of
``perturb`` against the declared channel, and unbiasedness with the exact variance.
"""

from __future__ import annotations

from typing import Any

# Small configurations: the channel is enumerable and the statistical tests are quick.
SMALL_CONFIGS: list[dict[str, Any]] = [
    {"mechanism": "grr", "epsilon": 1.0, "k": 2},
    {"mechanism": "grr", "epsilon": 0.5, "k": 5},
    {"mechanism": "grr", "epsilon": 3.0, "k": 8},
    {"mechanism": "sue", "epsilon": 1.0, "k": 2},
    {"mechanism": "sue", "epsilon": 2.5, "k": 6},
    {"mechanism": "oue", "epsilon": 0.5, "k": 3},
    {"mechanism": "oue", "epsilon": 3.0, "k": 9},  # 2**9 outputs, pad bits in the second byte
    {"mechanism": "ss", "epsilon": 1.0, "k": 2},  # d = 1: GRR
    {"mechanism": "ss", "epsilon": 1.0, "k": 7},  # d chosen by the exact risk
    {"mechanism": "ss", "epsilon": 2.0, "k": 8, "d": 5},  # explicit d > k/2: the complement
    {"mechanism": "blh", "epsilon": 1.0, "k": 6},
    {"mechanism": "olh", "epsilon": 0.5, "k": 5},  # g = 3
    {"mechanism": "olh", "epsilon": 1.5, "k": 8},  # g = 5
    {"mechanism": "olh", "epsilon": 3.0, "k": 12},  # g = 21 > k
    {"mechanism": "hr", "epsilon": 0.5, "k": 5},  # basic: 1 block of 8
    {"mechanism": "hr", "epsilon": 4.0, "k": 6},  # 6 blocks of 2
    {"mechanism": "hr", "epsilon": 2.0, "k": 12},  # 4 blocks of 4
    {"mechanism": "hr", "epsilon": 2.0, "k": 12, "blocks": 1},  # basic, chosen explicitly
    {"mechanism": "hr", "epsilon": 5.0, "k": 12},  # 12 blocks of 2
    {"mechanism": "dbitflip", "epsilon": 1.0, "k": 5, "d": 2, "memoize": False},  # one-shot
]


def config_id(config: dict[str, Any]) -> str:
    return "-".join(f"{v}" for v in config.values())
