#!/usr/bin/env python3
"""Regenerate the files derived from a declaration (python3 dev.py docs): docs/cli.md's field table from the
request's field declarations, and the embedded default deployment's JSON copy from its YAML (read at every
`specsize plan` without PyYAML's import; tests/test_docs.py checks both)."""

from __future__ import annotations

import sys
from pathlib import Path

from specsize.inputs.load import DEFAULT_JSON, DEFAULT_YAML, default_copy_text
from specsize.reports.fields_doc import BEGIN, splice

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
DATA = Path(__file__).resolve().parents[1] / "src" / "specsize" / "catalog" / "data"


def main() -> int:
    text = DOC.read_text()
    if BEGIN not in text:
        print(f"{DOC} has no field-table markers", file=sys.stderr)
        return 2
    DOC.write_text(splice(text))
    print(f"wrote the field table of {DOC}")
    (DATA / DEFAULT_JSON).write_text(default_copy_text((DATA / DEFAULT_YAML).read_text()))
    print(f"wrote {DATA / DEFAULT_JSON} from {DEFAULT_YAML}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
