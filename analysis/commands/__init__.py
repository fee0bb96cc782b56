"""Subcommands of ``ldp-analyze``; see ``analysis.cli``."""
