"""The mean estimate kind."""
