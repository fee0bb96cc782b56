"""``python -m client_sdk.conformance generate|check [--dir DIR] [--outputs FILE]``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from client_sdk.conformance.sealed import SEALED_FILE, build_sealed, check_sealed
from client_sdk.conformance.vectors import (
    VECTORS_DIR,
    VectorError,
    check_outputs,
    check_vectors,
    generate,
)


def main(argv: list[str] | None = None) -> int:
    """Rebuild the vectors (``generate``) or verify them (``check``); 1 on any mismatch."""
    parser = argparse.ArgumentParser(prog="python -m client_sdk.conformance", description=__doc__)
    parser.add_argument("command", choices=("generate", "check"))
    parser.add_argument("--dir", type=Path, default=VECTORS_DIR, help="the vector files' folder")
    parser.add_argument(
        "--outputs",
        type=Path,
        help="check another implementation's payloads: a JSON file {mechanism: [payload, ...]}",
    )
    args = parser.parse_args(argv)
    if args.command == "generate":
        paths = generate(args.dir)
        if args.dir == VECTORS_DIR:
            SEALED_FILE.write_text(json.dumps(build_sealed(), indent=1, ensure_ascii=False) + "\n")
            paths.append(SEALED_FILE)
        print(f"wrote {len(paths)} vector files ({args.dir})")
        return 0
    try:
        if args.outputs is not None:
            try:
                outputs = json.loads(args.outputs.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as error:
                print(f"{args.outputs}: not a readable JSON file ({error})", file=sys.stderr)
                return 2
            problems = check_outputs(outputs, args.dir)
        else:
            problems = check_vectors(args.dir)
            if args.dir == VECTORS_DIR and SEALED_FILE.exists():
                problems += check_sealed(SEALED_FILE)
    except VectorError as error:
        print(error, file=sys.stderr)
        return 2
    for problem in problems:
        print(problem, file=sys.stderr)
    print("ok" if not problems else f"{len(problems)} mismatch(es)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
