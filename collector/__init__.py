"""The collector: a Flask app over a Flask-free SQLite storage module."""
