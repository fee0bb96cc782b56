"""The project's version, defined once.

``pyproject.toml`` reads it (setuptools' dynamic ``version``); ``client_sdk``, ``collector`` and
``analysis`` re-export it as ``__version__``.
"""

__version__ = "0.1.0"
