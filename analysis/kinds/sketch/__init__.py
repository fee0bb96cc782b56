"""The sketch estimate kind."""
