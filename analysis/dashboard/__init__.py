"""The live dashboard: ``ldp-analyze dashboard --db PATH`` (``analysis.commands.dashboard``).

A Flask app of the analysis package, never of the collector: it reads the collector's database
read-only (:mod:`analysis.dashboard.data`), signs an admin in with the admin token
(:mod:`analysis.dashboard.auth`), and draws each kind of estimate with its own view
(:mod:`analysis.dashboard.views`) using the vendored Chart.js (``static/vendor/``).
"""

from analysis.dashboard.app import create_app

__all__ = ["create_app"]
