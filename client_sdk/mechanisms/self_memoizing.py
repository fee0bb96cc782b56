"""What the mechanisms with their own, switchable memoization share (dBitFlip, 1BitMean).

Their config has ``"memoize"`` (default true). Memoized, ``perturb`` needs the keyed source of
the device and campaign and every report of one memoized draw shares a permanent response;
otherwise ``perturb`` draws fresh randomness and refuses a keyed source, so a caller that thinks
it memoizes finds out (docs/math/memoization.md).
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from client_sdk.mechanisms.base import Mechanism
from client_sdk.mechanisms.memoization import DeviceKeyed, KeyedSource, check_keyed_source
from client_sdk.mechanisms.privacy import PermanentResponseEvent, PrivacyEvent, PureEvent


class SwitchableMemoization(DeviceKeyed, Mechanism):
    """A mixin, listed before the mechanism's base class; subclasses declare the field
    ``memoize: bool = True`` and the property ``epsilon_inf``."""

    memoizes_itself: ClassVar[bool] = True
    memoize: bool

    @property
    @abc.abstractmethod
    def epsilon_inf(self) -> float:
        """What unlimited reports of one memoized draw reveal."""

    def _check_memoize(self) -> None:
        if not isinstance(self.memoize, bool):
            raise ValueError(f"memoize must be true or false; got {self.memoize!r}")

    @property
    def memoized(self) -> bool:
        return self.memoize

    def keyed_source(self, permanent: Any) -> KeyedSource | None:
        """The keyed source of a ``perturb`` call: required when memoized, refused otherwise."""
        if self.memoize:
            return check_keyed_source(permanent, self.name)
        if permanent is not None:
            raise ValueError(f"{self.name} with memoize=false takes no keyed source (permanent)")
        return None

    def privacy_event(self) -> PrivacyEvent:
        """Memoized: the permanent draws at ``epsilon_inf``; otherwise the base class's event."""
        if self.memoize:
            return PermanentResponseEvent(self.privacy_epsilon, PureEvent(self.epsilon_inf))
        return super().privacy_event()
