"""How long a newcomer takes from a fresh clone to an estimate of each of three questions,
following only README.md and docs/campaigns.md (issue 27, "Figures").

    python3 scripts/newcomer_timing.py [--repo PATH] [--devices 2000] [--no-demo] [--keep]

The three questions: which of 40 screens users visit, how long sessions last, what users type
into search. The script clones the repository into a temporary folder and runs, timing each step:

1. README "The two commands", command 1: the install (``python3 -m venv .venv && .venv/bin/pip
   install -q -e '.[all]'``; pip answers from its cache when it has one) and then its
   ``.venv/bin/ldp-demo`` (skipped with ``--no-demo``);
2. README "Your own campaign, from a fresh clone to its first estimate": the block that makes
   the admin token, the database and starts the collector;
3. for each question, the document of docs/campaigns.md's section for it ("Which one of a known
   list", "A mean", "Free text, top terms"), written to a file with the changes the page tells
   a reader to make (its name; for the screens, 40 labels and ``k``), created with the README's
   ``campaign create`` line, fed with its ``ldp-demo --collector`` line and estimated with its
   ``ldp-analyze estimate ... --format table`` line (the campaign name put in each);
4. the README's ``kill $(cat collector.pid)``.

Every command is the text of a fenced block of the two pages, extracted here, never retyped;
the only edit is the collector's port (the README's fixed 8765 becomes a free one, so the script
can run beside another collector). It prints each step's seconds, the total, and the estimates,
and exits 1 if a step failed. The target of the issue: under 2 minutes for all three questions
including the install.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README_PORT = "8765"
FENCE = re.compile(r"^```(\w*)\s*$")
SCREENS = 40
QUESTIONS = (
    # (campaign name, docs/campaigns.md section, what the reader changes)
    ("screens", "Which one of a known list", "screens"),
    ("session-minutes", "A mean", None),
    ("search-terms", "Free text, top terms", None),
)


def sections(text: str) -> dict[str, list[tuple[str, str]]]:
    """The fenced blocks ``(language, body)`` under each ``##``/``###`` heading of a page."""
    found: dict[str, list[tuple[str, str]]] = {}
    heading = ""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("#"):
            heading = line.lstrip("#").strip()
        match = FENCE.match(line)
        if match is not None:
            body = []
            index += 1
            while index < len(lines) and not lines[index].startswith("```"):
                body.append(lines[index])
                index += 1
            found.setdefault(heading, []).append((match.group(1), "\n".join(body)))
        index += 1
    return found


def first_line(blocks: list[tuple[str, str]], start: str) -> str:
    """The first line of a bash block that starts with ``start``."""
    for language, body in blocks:
        if language != "bash":
            continue
        for line in body.splitlines():
            if line.strip().startswith(start):
                return line.strip()
    raise LookupError(f"no README line starting with {start!r}")


def free_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


class Steps:
    """Runs shell steps in the clone, timing each; keeps what they printed."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("LDP_")}
        self.env.pop("VIRTUAL_ENV", None)
        self.times: list[tuple[str, float, bool]] = []
        self.outputs: dict[str, str] = {}

    def run(self, name: str, script: str, *, timeout: float = 600) -> bool:
        print(f"--- {name}\n{script}", flush=True)
        started = time.perf_counter()
        try:
            done = subprocess.run(
                ["bash", "-e", "-c", script],
                cwd=self.folder,
                env=self.env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
            ok, out, err = done.returncode == 0, done.stdout, done.stderr
        except subprocess.TimeoutExpired as expired:
            ok, out, err = False, str(expired.stdout or ""), f"timed out after {timeout} s"
        seconds = time.perf_counter() - started
        self.times.append((name, seconds, ok))
        self.outputs[name] = out
        print(out, end="" if out.endswith("\n") or not out else "\n")
        if not ok:
            print(f"FAILED ({seconds:.1f} s): {err[-2000:]}", file=sys.stderr)
        print(f"    {seconds:.1f} s", flush=True)
        return ok


def campaign_document(body: str, name: str, change: str | None) -> dict[str, Any]:
    """A campaigns.md document with the reader's changes: its name, and for the screens 40
    labels (``domain``) and ``k`` ("change the name, the labels and the bounds to yours")."""
    document: dict[str, Any] = json.loads(body)
    document["name"] = name
    if change == "screens":
        document["domain"] = [f"screen-{i:02d}" for i in range(SCREENS)]
        document["mechanism"]["k"] = SCREENS
    return document


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", default=str(ROOT), help="the repository to clone (this one)")
    parser.add_argument(
        "--no-demo", action="store_true", help="skip command 1's ldp-demo (install only)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path printed)")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="ldp-newcomer-"))
    clone = workdir / "ldp-telemetry"
    steps = Steps(workdir)
    ok = steps.run("clone", f"git clone -q --depth 1 {shlex.quote('file://' + args.repo)} {clone}")
    steps.folder = clone
    readme = sections((clone / "README.md").read_text(encoding="utf-8"))
    pages = sections((clone / "docs" / "campaigns.md").read_text(encoding="utf-8"))
    port = free_port()

    command_1 = first_line(readme["The two commands"], "python3 -m venv .venv")
    install, _, demo = command_1.partition(" && .venv/bin/ldp-demo")
    ok = ok and steps.run("install (README command 1)", install)
    if ok and not args.no_demo:
        ok = steps.run("ldp-demo (README command 1)", ".venv/bin/ldp-demo" + demo)
    own = readme["Your own campaign, from a fresh clone to its first estimate"]
    serve_block = own[0][1].replace(README_PORT, port)
    ok = ok and steps.run("start the collector (README)", serve_block, timeout=120)
    token = (clone / ".admin-token").read_text().strip() if ok else ""
    steps.env["LDP_ADMIN_TOKEN"] = token  # "a second terminal runs this line too"
    create = first_line(own, ".venv/bin/ldp-collector campaign create")
    feed = first_line(own, ".venv/bin/ldp-demo --collector").replace(README_PORT, port)
    estimate = first_line(own, ".venv/bin/ldp-analyze estimate")
    try:
        for name, section, change in QUESTIONS:
            if not ok:
                break
            body = next(b for language, b in pages[section] if language == "json")
            document = campaign_document(body, name, change)
            (clone / f"{name}.json").write_text(json.dumps(document, indent=1) + "\n")
            script = "\n".join(
                [
                    create.replace("examples/app-theme.json", f"{name}.json"),
                    feed.replace("app-theme", name),
                    estimate.replace("app-theme", name),
                ]
            )
            ok = steps.run(f"question: {name} (create, feed, estimate)", script)
    finally:
        stop = first_line(readme["Stopping, and scaling out"], "kill")
        steps.run("stop the collector (README)", stop)

    print("\nseconds per step:")
    for name, seconds, passed in steps.times:
        print(f"  {seconds:7.1f}  {name}{'' if passed else '  FAILED'}")
    total = sum(seconds for _, seconds, _ in steps.times)
    demo_seconds = sum(s for n, s, _ in steps.times if n.startswith("ldp-demo"))
    without = f" ({total - demo_seconds:.1f} without the demo)" if demo_seconds else ""
    print(f"  {total:7.1f}  total{without}")
    if args.keep:
        print(f"clone kept in {clone}")
    else:
        subprocess.run(["rm", "-rf", str(workdir)], check=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
