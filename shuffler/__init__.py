"""The anonymizing shuffler."""
