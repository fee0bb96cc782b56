"""Offline analysis: streaming estimates with error bars, post-processing, the gap to the
central model, privacy accounting, reports. Imports ``client_sdk`` and reads stored reports
through ``collector.storage``."""

from analysis.estimation import FrequencyEstimate, MeanEstimate, aggregate, estimate

__all__ = ["FrequencyEstimate", "MeanEstimate", "aggregate", "estimate"]
