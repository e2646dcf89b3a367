#!/usr/bin/env python3
"""Regenerate the golden Markdown reports in tests/golden (python3 dev.py goldens)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_report import GOLDEN, GOLDEN_ARGS  # noqa: E402


def main() -> int:
    GOLDEN.mkdir(exist_ok=True)
    for name, args in GOLDEN_ARGS.items():
        done = subprocess.run([sys.executable, "-m", "specsize.cli.main", "report", "--format", "markdown", *args],
                              capture_output=True, text=True, check=False)
        if done.returncode not in (0, 1, 3):
            print(done.stderr, file=sys.stderr)
            return done.returncode
        (GOLDEN / f"report-{name}.md").write_text(done.stdout)
        print(f"wrote {GOLDEN / f'report-{name}.md'} (exit {done.returncode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
