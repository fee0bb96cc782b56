"""A campaign's lifecycle beyond creation: what its creator should hear at creation."""

from __future__ import annotations

from client_sdk.policy import DEFAULT_POLICY, PolicyViolation
from collector.storage import StoredCampaign

__all__ = ["default_policy_warnings"]


def default_policy_warnings(campaign: StoredCampaign) -> list[str]:
    """Why devices running the SDK's default ``PrivacyPolicy`` would refuse ``campaign`` (an
    epsilon above its ``max_epsilon``...), as messages for its creator; empty when they accept
    it. The check is the devices' own (``client_sdk.policy.PrivacyPolicy.check``)."""
    try:
        DEFAULT_POLICY.check(
            campaign.name,
            campaign.mechanism,
            config_id=campaign.config_id,
            shuffle=campaign.shuffle,
            through_shuffler=campaign.shuffle is not None,
        )
    except PolicyViolation as violation:
        return [
            f"devices with the SDK's default PrivacyPolicy will refuse this campaign: {violation}; "
            "an app must raise its policy to report to it"
        ]
    return []
