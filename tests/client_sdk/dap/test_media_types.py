"""DAP-18's media types (draft-ietf-ppm-dap-18: ``application/ppm-dap;message=...``), as Janus
sends and checks them (divviup/janus messages/src/lib.rs, the ``MEDIA_TYPE`` constants, at
commit 4ab28a36c70c97f88e02ec01cd224fe6762177ba). Earlier drafts' ``application/dap-upload-req``
family is refused by a DAP-18 aggregator that checks ``Content-Type``."""

from __future__ import annotations

import pytest

from client_sdk.dap import messages as m

JANUS = {
    "HpkeConfigList": "application/ppm-dap;message=hpke-config-list",
    "UploadRequest": "application/ppm-dap;message=upload-req",
    "UploadErrors": "application/ppm-dap;message=upload-errors",
    "CollectionJobReq": "application/ppm-dap;message=collection-job-req",
    "CollectionJobResp": "application/ppm-dap;message=collection-job-resp",
    "AggregationJobInitReq": "application/ppm-dap;message=aggregation-job-init-req",
    "AggregationJobContinueReq": "application/ppm-dap;message=aggregation-job-continue-req",
    "AggregationJobResp": "application/ppm-dap;message=aggregation-job-resp",
    "AggregateShareReq": "application/ppm-dap;message=aggregate-share-req",
    "AggregateShare": "application/ppm-dap;message=aggregate-share",
}


@pytest.mark.parametrize("name", sorted(JANUS))
def test_media_type_is_dap18s(name: str) -> None:
    assert JANUS[name] == getattr(m, name).MEDIA_TYPE
