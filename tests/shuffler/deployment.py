"""The shuffler tests' deployment: a real collector and a real shuffler in front of it, each a
gunicorn process on a free loopback port (``collector.process.ServerProcess``), the shuffler's
token known to the collector. One harness for every test that runs the two together."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from collector.process import CollectorProcess
from shuffler.process import ShufflerProcess

_D = TypeVar("_D", bound="Deployment")


class Deployment:
    """``Deployment(root, campaign=..., **shuffler_options)``: ``start`` starts the collector,
    then the shuffler pointed at it, and creates ``campaign`` (its document in ``document``);
    ``stop`` (or leaving ``with``) stops both."""

    def __init__(
        self, root: Path, *, campaign: dict[str, Any] | None = None, **shuffler_options: Any
    ) -> None:
        self.root = root
        self.campaign = campaign
        self.collector = CollectorProcess(root / "collector.db", workers=1, log_dir=root)
        options: dict[str, Any] = {"workers": 1, "log_dir": root, **shuffler_options}
        self.shuffler = ShufflerProcess(root / "shuffler.db", "", **options)
        self.collector.env["LDP_SHUFFLER_TOKEN"] = self.shuffler.token
        self.document: dict[str, Any] = {}

    def start(self: _D) -> _D:
        self.collector.start()
        self.shuffler.collector = self.collector.url
        try:
            self.shuffler.start()
            if self.campaign is not None:
                self.document = self.collector.create_campaign(self.campaign)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.shuffler.stop()
        self.collector.stop()

    def __enter__(self: _D) -> _D:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
