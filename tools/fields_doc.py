#!/usr/bin/env python3
"""Regenerate docs/cli.md's field table from the request's field declarations (python3 dev.py docs)."""

from __future__ import annotations

import sys
from pathlib import Path

from specsize.reports.fields_doc import BEGIN, splice

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def main() -> int:
    text = DOC.read_text()
    if BEGIN not in text:
        print(f"{DOC} has no field-table markers", file=sys.stderr)
        return 2
    DOC.write_text(splice(text))
    print(f"wrote the field table of {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
