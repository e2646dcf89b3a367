"""The docs stay true to the code: docs/cli.md's field table is the field declarations' own rendering, the
embedded default's JSON copy is its YAML, and the README's Python API snippet runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from specsize.inputs.request import FIELDS
from specsize.reports.fields_doc import splice

ROOT = Path(__file__).resolve().parents[1]


def test_cli_field_table_is_generated_from_the_declarations():
    text = (ROOT / "docs" / "cli.md").read_text()
    assert text == splice(text), "docs/cli.md's field table is stale: run `python3 dev.py docs`"
    for name in FIELDS:
        assert f"`{name}" in text or f"`workload.{name}`" in text


def test_embedded_default_json_is_its_yaml():
    # `specsize plan` reads the embedded default from its JSON copy (no PyYAML import); the YAML is the declaration
    import json

    from specsize.inputs.load import DEFAULT_JSON, DEFAULT_YAML, default_copy_text, default_deployment

    data = ROOT / "src" / "specsize" / "catalog" / "data"
    copy = (data / DEFAULT_JSON).read_text()
    assert copy == default_copy_text((data / DEFAULT_YAML).read_text()), "stale: run `python3 dev.py docs`"
    assert default_deployment() == json.loads(copy)


def readme_snippet() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Python API", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_python_snippet_runs(tmp_path):
    done = subprocess.run([sys.executable, "-c", readme_snippet()], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "the snippet prints what it shows"
