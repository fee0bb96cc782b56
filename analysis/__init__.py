"""Offline analysis: streaming estimates with error bars, post-processing, the gap to the
central model, privacy accounting, reports. Imports ``client_sdk`` and reads stored reports
through ``collector.storage`` (docs/architecture.md).

A round trip from device to estimate, with a seeded generator in place of the device's CSPRNG:

>>> import numpy as np
>>> from client_sdk import mechanism_from_config
>>> m = mechanism_from_config({"mechanism": "oue", "epsilon": 2.0, "k": 4})
>>> truth = np.array([0.5, 0.3, 0.15, 0.05])
>>> values = np.repeat(np.arange(4), (truth * 20_000).astype(int))
>>> reports = m.perturb(values, rng=np.random.default_rng(7))
>>> est = estimate(m, reports)
>>> est.n
20000
>>> bool(np.all(np.abs(est.frequencies - truth) < 5 * est.std_errors))  # within 5 standard errors
True
"""

from client_sdk._extras import require

require("analysis")  # one line naming the extra, before scipy's own ImportError could

from analysis.estimation import FrequencyEstimate, MeanEstimate, aggregate, estimate  # noqa: E402
from client_sdk._version import __version__  # noqa: E402

__all__ = ["FrequencyEstimate", "MeanEstimate", "__version__", "aggregate", "estimate"]
