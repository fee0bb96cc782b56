"""One version for the three packages and the installed distribution."""

import importlib.metadata
import re

import analysis
import client_sdk
import collector

# PEP 440's public version scheme (release segment, optional pre/post/dev parts).
_PEP440 = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")


def test_the_three_packages_share_one_version() -> None:
    assert client_sdk.__version__ == collector.__version__ == analysis.__version__
    assert _PEP440.match(client_sdk.__version__), client_sdk.__version__


def test_the_installed_distribution_reports_the_same_version() -> None:
    # pyproject.toml reads client_sdk/_version.py; the editable install's metadata must agree.
    assert importlib.metadata.version("ldp-telemetry") == client_sdk.__version__
