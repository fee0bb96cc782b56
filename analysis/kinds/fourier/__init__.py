"""The fourier estimate kind."""
