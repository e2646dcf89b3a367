"""The import-layer contract (design.md): imports point inward only. Read from the source with `ast`, so a
lazy import inside a function counts as much as one at the top of a module."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "specsize"

# what each layer may import of ours (besides itself); everything else is a violation
ALLOWED = {
    "core": set(),
    "catalog": {"core"},
    "engines": {"core"},
    "simulator": {"core"},
    "planner": {"core", "engines", "simulator", "reports"},  # reports: only result.to_dict's serializer
    "inputs": {"core", "catalog", "engines", "planner", "adapters"},
    "adapters": {"core"},
    "measure": {"core", "catalog", "inputs", "adapters"},
    "reports": {"core", "planner", "simulator", "engines", "inputs"},  # inputs: the field table docs/cli.md shows
    "cli": {"core", "inputs", "engines", "reports", "adapters", "api", "measure", "service", "sweep"},
    "service": {"core", "inputs", "engines", "reports", "adapters", "api", "planner"},
    "sweep": {"core", "inputs", "planner", "reports", "adapters", "api"},  # a shell over api, like the cli
}


def _imports(path: Path) -> list[tuple[str, int]]:
    """(first package of ours, line) for every import of specsize in the module at `path`."""
    tree = ast.parse(path.read_text())
    package = path.relative_to(SRC.parent).with_suffix("").parts  # ("specsize", "planner", "plan")
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level]
                parts = list(base) + (node.module.split(".") if node.module else [])
                if len(parts) == 1 and not node.module:  # `from .. import x`: the names are modules
                    out += [(alias.name, node.lineno) for alias in node.names]
                    continue
            else:
                parts = (node.module or "").split(".")
            if parts and parts[0] == "specsize" and len(parts) > 1:
                out.append((parts[1], node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "specsize" and len(parts) > 1:
                    out.append((parts[1], node.lineno))
    return out


def _layer(path: Path) -> str:
    return path.relative_to(SRC).parts[0].removesuffix(".py")


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_imports_point_inward(layer):
    violations = []
    for path in sorted((SRC / layer).rglob("*.py")):
        for target, line in _imports(path):
            if target not in (layer, "__version__") and target not in ALLOWED[layer]:
                violations.append(f"{path.relative_to(SRC)}:{line} imports specsize.{target}")
    assert not violations, "\n".join(violations)


def test_core_imports_nothing_of_ours_and_planner_reads_no_catalog():
    for path in (SRC / "core").rglob("*.py"):
        assert all(t == "core" for t, _ in _imports(path)), path
    for path in (SRC / "planner").rglob("*.py"):
        assert not any(t in ("catalog", "inputs", "api") for t, _ in _imports(path)), path


def test_planner_and_core_open_no_files():
    for layer in ("core", "planner", "simulator"):
        for path in (SRC / layer).rglob("*.py"):
            text = path.read_text()
            for needle in ("open(", ".read_text(", ".write_text(", "urlopen"):
                assert needle not in text, f"{path.relative_to(SRC)} uses {needle}"


def test_cli_import_loads_no_heavy_library():
    code = ("import sys, specsize.cli.main, specsize.api; heavy = [m for m in ('matplotlib', 'torch', 'numpy', "
            "'ray', 'pydantic', 'fastapi', 'sqlalchemy', 'uvicorn', 'argon2') if m in sys.modules]; print(','.join(heavy))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
