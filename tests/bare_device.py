"""A device on the SDK alone: records and flushes to a collector, seals, shards a Prio3 report.

    python -I tests/bare_device.py --collector URL --campaign NAME --state-dir DIR [--poison]

Run as a script (``-I``: the tests folder, which holds a ``collector`` package of tests, must not
be on ``sys.path``) by tests/test_layering.py (the project's environment, ``--poison``: every
server-only module made unimportable first) and tests/test_packaging.py (a fresh environment
with the wheel installed without extras). It imports every module of ``client_sdk`` and prints
one JSON line: what it recorded, what the collector acknowledged, and the server-only modules
that ended up imported (none, or the SDK depends on a server extra).
"""

from __future__ import annotations

import argparse
import base64
import importlib
import json
import os
import pkgutil
import sys
from typing import Any

# What only the server roles install (client_sdk/_extras.py), and the server packages.
SERVER_ONLY = (
    "flask",
    "werkzeug",
    "gunicorn",
    "sqlite_utils",
    "prometheus_client",
    "scipy",
    "matplotlib",
    "tqdm",
    "pyarrow",
    "dask",
    "distributed",
    "collector",
    "shuffler",
    "analysis",
)
# The campaign the tests create on their collector, and the values the device records.
CAMPAIGN: dict[str, Any] = {
    "name": "colors",
    "mechanism": {"mechanism": "grr", "epsilon": 2.0, "k": 4},
    "domain": ["red", "green", "blue", "cyan"],
    "min_batch_size": 50,
}
VALUES = ("red", "green", "blue", "cyan", "red")


def command(python: list[str], collector_url: str, state_dir: str, *, poison: bool) -> list[str]:
    """The command line that runs this script with ``python`` against ``CAMPAIGN``."""
    arguments = ["--collector", collector_url, "--campaign", CAMPAIGN["name"]]
    arguments += ["--state-dir", state_dir, *(["--poison"] if poison else [])]
    return [*python, "-I", __file__, *arguments]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--collector", required=True)
    parser.add_argument("--campaign", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--poison", action="store_true", help="make SERVER_ONLY unimportable")
    args = parser.parse_args()
    if args.poison:
        for name in SERVER_ONLY:
            sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises

    import client_sdk
    from client_sdk import TelemetryClient, mechanism_from_config

    for module in pkgutil.walk_packages(client_sdk.__path__, "client_sdk."):
        if not module.name.endswith("__main__"):  # a module's command line would run
            importlib.import_module(module.name)

    client = TelemetryClient(args.collector, state_dir=args.state_dir)
    try:
        ids = [client.record(args.campaign, value) for value in VALUES]
        acknowledged = client.flush()
    finally:
        client.close()

    from nacl.public import PrivateKey, SealedBox

    from client_sdk.sealing import key_id_of, seal_payloads

    secret = PrivateKey.generate()
    public = bytes(secret.public_key)
    mechanism = mechanism_from_config({"mechanism": "grr", "epsilon": 2.0, "k": 4})
    payloads = mechanism.to_wire(mechanism.perturb([0, 3]))
    envelopes = seal_payloads(
        payloads,
        public_key=base64.urlsafe_b64encode(public).decode("ascii").rstrip("="),
        key_id=key_id_of(public),
        campaign=args.campaign,
        config_id="c" * 32,
        mechanism=mechanism,
    )
    opened = [
        json.loads(SealedBox(secret).decrypt(base64.urlsafe_b64decode(e["sealed"] + "==")))
        for e in envelopes
    ]

    from client_sdk.vdaf import Prio3Count

    prio3 = Prio3Count(2)
    _, shares = prio3.shard(b"ctx", 1, os.urandom(prio3.NONCE_SIZE), os.urandom(prio3.RAND_SIZE))

    print(
        json.dumps(
            {
                "client_sdk": client_sdk.__file__,
                "recorded": len(ids),
                "acknowledged": acknowledged,
                "sealed_payloads": [report["payload"] for report in opened],
                "payloads": payloads,
                "prio3_shares": len(shares),
                "server_modules": sorted(n for n in SERVER_ONLY if sys.modules.get(n) is not None),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
