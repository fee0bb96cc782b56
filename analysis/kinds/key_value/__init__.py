"""The key_value estimate kind."""
