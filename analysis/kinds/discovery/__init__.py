"""The discovery estimate kind."""
