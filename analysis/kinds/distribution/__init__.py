"""The distribution estimate kind."""
