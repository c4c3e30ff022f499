"""Train a Quoter model: `python train.py --config configs/en-offline.yaml --data FILE --output DIR
[--joint.epochs 2 ...]`, the same as `quoter train` with `--set joint.epochs=2`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from quoter.errors import QuoterError


def dotted_overrides(tokens: list[str]) -> dict[str, str]:
    """`--key value` and `--key=value` pairs from the arguments argparse did not know."""
    overrides: dict[str, str] = {}
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if not token.startswith("--") or len(token) == 2:
            raise QuoterError(f"expected a setting such as --joint.epochs 2, got '{token}'")
        key, sep, value = token[2:].partition("=")
        if not sep:
            if index + 1 >= len(tokens):
                raise QuoterError(f"--{key} needs a value")
            index += 1
            value = tokens[index]
        overrides[key] = value
        index += 1
    return overrides


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, train, and return the exit status (2 with one line on stderr for a bad input)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--config", type=Path, help="YAML config (see configs/)")
    parser.add_argument("--data", type=Path, help="QuoteR TSV or JSONL file")
    parser.add_argument("--splits", type=Path, help="splits JSON of half-open line ranges")
    parser.add_argument("--part", help="official QuoteR part: english, modern_chinese, ancient_chinese")
    parser.add_argument("--output", type=Path, help="folder to write the bundle to")
    known, rest = parser.parse_known_args(argv)
    try:
        from quoter.cli.train_command import run_training

        if known.splits is not None and known.part is not None:
            raise QuoterError("give either --splits or --part, not both")
        run_training(known.config, known.data, known.splits, known.part, known.output, dotted_overrides(rest))
    except QuoterError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
