"""The multi estimate kind."""
