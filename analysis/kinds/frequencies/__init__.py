"""The frequencies estimate kind."""
