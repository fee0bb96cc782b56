"""Moved to :mod:`analysis.kinds.frequencies.gap`; this name stays only until the report's import
(``analysis/report.py``, being split into the kinds' views) follows. Integrator: delete it then."""

from analysis.kinds.frequencies.gap import shuffled_column

__all__ = ["shuffled_column"]
