"""The source stays clean under the linters pyproject.toml configures: `ruff check src` and `mypy` (its
[tool.mypy] section names the files), each run from the repository root with this interpreter."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(module: str, *args: str) -> None:
    if importlib.util.find_spec(module) is None:
        reason = f"{module} is not installed in this environment (pip install {module})"
        print(reason)
        pytest.skip(reason)
    proc = subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"{module} {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"


def test_ruff_check_src_is_clean():
    _run("ruff", "check", "src")


def test_mypy_is_clean():
    _run("mypy")
