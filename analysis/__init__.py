"""Offline analysis: streaming estimates with error bars, post-processing, the gap to the
central model, privacy accounting, reports. Imports ``client_sdk`` and reads stored reports
through ``collector.storage``."""

from analysis.estimation import FrequencyEstimate, MeanEstimate, aggregate, estimate
from client_sdk._version import __version__

__all__ = ["FrequencyEstimate", "MeanEstimate", "__version__", "aggregate", "estimate"]
