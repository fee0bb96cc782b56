"""The minimum batch every estimate obeys: below a campaign's ``min_batch_size`` reports no
estimate is released (docs/architecture.md). A leaf module, so that any kind of estimate can
refuse a small batch without loading another kind's module."""

from __future__ import annotations

__all__ = ["InsufficientReports", "require_min_batch"]


class InsufficientReports(ValueError):
    """Fewer reports than the campaign's ``min_batch_size``: no estimate is released."""

    def __init__(self, campaign: str | None, n: int, minimum: int) -> None:
        who = f"campaign {campaign!r}" if campaign is not None else "the estimate"
        super().__init__(
            f"{who} has {n} reports, fewer than its min_batch_size {minimum}; "
            "no estimate is released"
        )
        self.campaign = campaign
        self.n = n
        self.minimum = minimum


def require_min_batch(n: int, min_batch_size: int | None, campaign: str | None = None) -> None:
    """Raise :class:`InsufficientReports` when ``n < min_batch_size`` (``None``: no minimum)."""
    if min_batch_size is not None and n < min_batch_size:
        raise InsufficientReports(campaign, int(n), int(min_batch_size))
