"""The rappor estimate kind."""
