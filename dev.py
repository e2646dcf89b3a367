#!/usr/bin/env python3
"""Developer entry point that needs nothing but python3.

    python3 dev.py plan [ARGS...]   create .venv if needed, install specsize, run `specsize plan ARGS`
    python3 dev.py test [PYTEST ARGS...]  same environment plus test tools, run the whole test suite
    python3 dev.py bench            run the benchmarks in bench/ (accuracy and speed tables)
    python3 dev.py catalog          regenerate the embedded model catalog from ../shared/model-configs
    python3 dev.py goldens          regenerate the golden Markdown reports in tests/golden

The virtual environment lives in .venv next to this file; it is created once and reused.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / ("python.exe" if os.name == "nt" else "python")
STAMP = VENV / ".specsize-installed"


def _run(cmd: list[str], **kw) -> int:
    return subprocess.call([str(c) for c in cmd], cwd=ROOT, **kw)


def _ensure_venv(extras: str) -> None:
    if not PY.exists():
        print(f"dev.py: creating virtual environment in {VENV}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    # Reinstall when pyproject.toml changes or new extras are asked for.
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    have = STAMP.read_text().split() if STAMP.exists() else []
    if want in have:
        return
    print(f"dev.py: installing specsize[{extras}] into {VENV}", file=sys.stderr)
    rc = _run([PY, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", f".[{extras}]"])
    if rc != 0:
        sys.exit(rc)
    STAMP.write_text("\n".join(have + [want]))


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0
    task, rest = argv[0], argv[1:]
    if task == "plan":
        _ensure_venv("test")
        return _run([BIN / "specsize", "plan", *rest])
    if task == "test":
        _ensure_venv("test")
        return _run([PY, "-m", "pytest", *rest])
    if task == "bench":
        _ensure_venv("test")
        rc = 0
        for script in sorted((ROOT / "bench").glob("*.py")):
            print(f"\n=== {script.name}", flush=True)
            rc |= _run([PY, script])
        return rc
    if task == "goldens":
        _ensure_venv("test")
        return _run([PY, ROOT / "tools" / "goldens.py", *rest])
    if task == "catalog":
        _ensure_venv("test")
        return _run([PY, ROOT / "tools" / "build_catalog.py", *rest])
    print(f"dev.py: unknown task {task!r}; accepted: plan, test, bench, catalog, goldens", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
