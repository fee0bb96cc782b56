"""The ranges estimate kind."""
