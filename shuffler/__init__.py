"""The anonymizing shuffler."""

from client_sdk._extras import require

require("shuffler")  # one line naming the extra, before flask's own ImportError could
