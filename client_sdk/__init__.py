"""Client SDK: randomizes telemetry on the device so only randomized reports ever leave it.

The embedding API is :class:`TelemetryClient` (record, flush, status, close; see
``client_sdk.client``), the app's :class:`PrivacyPolicy`, and the errors an app may catch; the
rest of ``__all__`` is for simulations and other SDKs. ``__version__`` is the package version.

Imports nothing from ``collector`` or ``analysis`` (docs/architecture.md: data and imports flow
device -> collector -> analysis).

A mechanism is built from its JSON config, which round-trips, and randomizes arrays of values
(``rng=None``, the default, is the OS CSPRNG; tests pass a seeded generator):

>>> import numpy as np
>>> m = mechanism_from_config({"mechanism": "olh", "epsilon": 2.0, "k": 1024})
>>> m.to_config()  # the resolved number of hash buckets is part of the config
{'mechanism': 'olh', 'epsilon': 2.0, 'k': 1024, 'g': 8}
>>> mechanism_from_config(m.to_config()) == m
True
>>> reports = m.perturb(np.array([3, 3, 1000]), rng=np.random.default_rng(0))
>>> payloads = m.to_wire(reports)  # one JSON-safe payload per report
>>> sorted(payloads[0])
['seed', 'y']
>>> bool(np.array_equal(m.from_wire(payloads), reports))
True
"""

from client_sdk._version import __version__
from client_sdk.budget import BudgetExceededError, BudgetPolicy, BudgetStatus
from client_sdk.client import (
    Campaign,
    CampaignChangedError,
    CampaignClosedError,
    CampaignVerificationError,
    TelemetryClient,
    UploadError,
)
from client_sdk.mechanisms import (
    AggregateStatistic,
    FrequencyOracle,
    Mechanism,
    WireFormatError,
    mechanism_from_config,
)
from client_sdk.policy import DEFAULT_POLICY, PolicyViolation, PrivacyPolicy
from client_sdk.randomness import SYSTEM_RANDOM, HmacWordSource, SystemRandomSource
from client_sdk.state import StateDirLockedError

__all__ = [
    "DEFAULT_POLICY",
    "SYSTEM_RANDOM",
    "AggregateStatistic",
    "BudgetExceededError",
    "BudgetPolicy",
    "BudgetStatus",
    "Campaign",
    "CampaignChangedError",
    "CampaignClosedError",
    "CampaignVerificationError",
    "FrequencyOracle",
    "HmacWordSource",
    "Mechanism",
    "PolicyViolation",
    "PrivacyPolicy",
    "StateDirLockedError",
    "SystemRandomSource",
    "TelemetryClient",
    "UploadError",
    "WireFormatError",
    "__version__",
    "mechanism_from_config",
]
"""The public API: what an app or another SDK may import from ``client_sdk`` and rely on."""
