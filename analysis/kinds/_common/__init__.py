"""Code several estimate kinds share: below every kind, importing none of them."""
