"""The wheel, as a user gets it: built from this checkout, installed non-editable into a fresh venv.

The editable install of the rest of the suite reads every file straight from src/, so it cannot see a data
file left out of the wheel or a dependency missing from pyproject.toml. Here the wheel is built (from a copy
of the checkout without its egg-info, build/ or caches, so that no stale file list of an earlier build can
hide a missing package-data pattern), installed with its dependencies into a venv without system
site-packages, and the installed `specsize` runs from a directory outside the source tree with PYTHONPATH
unset. It needs a pip index (the one pip is configured with); without one it skips and says why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parents[1]
VERDICT_EXITS = {0, 1, 3}  # fits, thin, does_not_fit; 2 is bad input, 4 an internal error
BIN = "Scripts" if os.name == "nt" else "bin"
# Files of the checkout that a build reads; the rest of the tree (tests, .venv, docs) stays out of the copy.
BUILD_INPUTS = ("pyproject.toml", "README.md", "LICENSE", "LICENSE.txt", "MANIFEST.in", "setup.cfg", "setup.py")
NETWORK_SIGNS = ("NewConnectionError", "Failed to establish a new connection", "Temporary failure in name resolution",
                 "Max retries exceeded", "Network is unreachable", "ConnectTimeout", "ReadTimeout", "ProxyError",
                 "No matching distribution found", "Could not find a version that satisfies")


def _clean_env(venv: Path | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH"}}
    env.update(PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1",
               MPLBACKEND="Agg", NO_COLOR="1")
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = str(venv / BIN) + os.pathsep + env.get("PATH", "")
    return env


def _run(cmd: list, cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _tail(proc: subprocess.CompletedProcess, n: int = 3000) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout[-n:]}\n--- stderr\n{proc.stderr[-n:]}"


def _skip_if_offline(proc: subprocess.CompletedProcess, what: str, python: str, scratch: Path) -> None:
    """Skip when pip could not reach an index; a failure with a reachable index is the wheel's own and fails."""
    text = proc.stdout + proc.stderr
    if not any(sign in text for sign in NETWORK_SIGNS):
        return
    probe = _run([python, "-m", "pip", "download", "--no-deps", "-q", "-d", scratch / "probe", "click"],
                 cwd=scratch, env=_clean_env(), timeout=300)
    if probe.returncode != 0:
        reason = f"{what}: pip cannot reach a package index\n{_tail(proc, 1500)}"
        print(reason, file=sys.stderr)
        pytest.skip(reason)


def _copy_checkout(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for name in BUILD_INPUTS:
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, dest / name)
    shutil.copytree(ROOT / "src", dest / "src",
                    ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "*.pyc", "build", "dist"))
    return dest


class Installed:
    def __init__(self, source: Path, wheel: Path, venv: Path, cwd: Path, timings: dict[str, float]):
        self.source, self.wheel, self.venv, self.cwd, self.timings = source, wheel, venv, cwd, timings
        self.python = venv / BIN / ("python.exe" if os.name == "nt" else "python")
        self.specsize = venv / BIN / ("specsize.exe" if os.name == "nt" else "specsize")

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return _run([self.specsize, *args], cwd=self.cwd, env=_clean_env(self.venv), timeout=timeout)

    def py(self, code: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return _run([self.python, "-c", code], cwd=self.cwd, env=_clean_env(self.venv), timeout=timeout)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    assert ROOT not in base.parents, "the scratch directory must lie outside the source tree"
    timings: dict[str, float] = {}

    start = time.monotonic()
    source = _copy_checkout(base / "source")
    dist = base / "dist"
    build = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, source],
                 cwd=base, env=_clean_env())
    timings["build wheel"] = time.monotonic() - start
    if build.returncode != 0:
        _skip_if_offline(build, "building the wheel", sys.executable, base)
        pytest.fail(f"pip wheel failed:\n{_tail(build)}")
    wheels = sorted(dist.glob("specsize-*.whl"))
    assert len(wheels) == 1, wheels

    start = time.monotonic()
    venv = base / "venv"
    made = _run([sys.executable, "-m", "venv", venv], cwd=base, env=_clean_env(), timeout=300)
    assert made.returncode == 0, _tail(made)
    timings["create venv"] = time.monotonic() - start

    start = time.monotonic()
    python = venv / BIN / ("python.exe" if os.name == "nt" else "python")
    install = _run([python, "-m", "pip", "install", "-q", wheels[0]], cwd=base, env=_clean_env(venv), timeout=900)
    timings["install wheel + dependencies"] = time.monotonic() - start
    if install.returncode != 0:
        _skip_if_offline(install, "installing the wheel's dependencies", str(python), base)
        pytest.fail(f"pip install of the wheel failed:\n{_tail(install)}")

    work = base / "work"  # where the commands run: outside the source tree, nothing of it importable
    work.mkdir()
    print("wheel test set-up: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()), file=sys.stderr)
    return Installed(source, wheels[0], venv, work, timings)


def test_wheel_holds_every_data_file_of_the_package(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    package = installed.source / "src" / "specsize"  # the copy the wheel was built from
    data = sorted(str(p.relative_to(package.parent)).replace(os.sep, "/") for p in package.rglob("*")
                  if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts)
    assert "specsize/catalog/data/default_deployment.yaml" in data
    assert "specsize/catalog/data/default_deployment.json" in data
    assert "specsize/engines/data/engine_flags.json" in data
    assert any(name.startswith("specsize/catalog/data/models/") for name in data)
    missing = [name for name in data if name not in names]
    assert not missing, f"data files left out of the wheel (see [tool.setuptools.package-data]): {missing}"
    modules = sorted(str(p.relative_to(package.parent)).replace(os.sep, "/") for p in package.rglob("*.py"))
    left_out = [m for m in modules if m not in names]
    assert not left_out, f"Python modules left out of the wheel: {left_out}"


def test_import_resolves_to_the_venv_not_the_checkout(installed):
    proc = installed.py("import json, sysconfig, specsize; "
                        "print(json.dumps([specsize.__file__, sysconfig.get_paths()['purelib']]))")
    assert proc.returncode == 0, _tail(proc)
    module, purelib = (Path(p).resolve() for p in json.loads(proc.stdout.strip().splitlines()[-1]))
    assert purelib in module.parents, f"specsize imported from {module}, not from the venv's {purelib}"
    assert ROOT not in module.parents, f"specsize imported from the checkout: {module}"
    # no editable hook or .pth pointing back into the checkout
    pth = [p for p in purelib.glob("*.pth") if str(ROOT / "src") in p.read_text(errors="replace")]
    assert not pth, pth


def test_matplotlib_is_a_core_dependency_but_loaded_lazily(installed):
    proc = installed.py("import sys, importlib.metadata as md, specsize.cli.main; "
                        "print('matplotlib' in sys.modules, any(r.startswith('matplotlib') "
                        "for r in md.requires('specsize') if 'extra ==' not in r))")
    assert proc.returncode == 0, _tail(proc)
    assert proc.stdout.split() == ["False", "True"], proc.stdout


def test_plan(installed):
    proc = installed.cli("plan")
    assert proc.returncode in VERDICT_EXITS, _tail(proc)
    assert re.search(r"verdict|what breaks first|\b(fits|thin|does not fit)\b", proc.stdout, re.I), _tail(proc)


def test_plan_json(installed):
    proc = installed.cli("plan", "--format", "json")
    assert proc.returncode in VERDICT_EXITS, _tail(proc)
    out = json.loads(proc.stdout)
    assert out["verdict"] in {"fits", "thin", "does_not_fit"}


def test_report_html(installed):
    proc = installed.cli("report", "-o", "r.html")
    assert proc.returncode in VERDICT_EXITS, _tail(proc)
    report = installed.cwd / "r.html"
    assert report.is_file(), _tail(proc)
    assert "<svg" in report.read_text(errors="replace")


def test_simulate(installed):
    proc = installed.cli("simulate", "--acceptance-rate", "0.7", "--duration", "30")
    assert proc.returncode in {0, 1}, _tail(proc)


def test_emit_vllm(installed):
    proc = installed.cli("plan", "--emit", "vllm")
    assert proc.returncode in VERDICT_EXITS, _tail(proc)
    assert "vllm serve" in proc.stdout, _tail(proc)


def _readme_python_api_snippet(readme: str) -> str | None:
    """The first ```python block of the section headed '## Python API' (None when there is none)."""
    section = re.search(r"^## Python API[^\n]*\n(.*?)(?=^#{1,2} |\Z)", readme, re.M | re.S)
    if not section:
        return None
    block = re.search(r"^```python[^\n]*\n(.*?)^```", section.group(1), re.M | re.S)
    return block.group(1) if block else None


def test_readme_python_api_snippet(installed):
    snippet = _readme_python_api_snippet((ROOT / "README.md").read_text())
    if snippet is None:
        pytest.skip("README has no Python API section yet")
    proc = installed.py(snippet)
    assert proc.returncode == 0, f"README's Python API snippet failed in the installed wheel:\n{_tail(proc)}"
