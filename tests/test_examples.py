"""Every example deployment file parses and plans; the embedded default matches its example copy."""

from pathlib import Path

import pytest

from specsize.inputs.load import default_deployment, load_request, read_yaml_file
from specsize.inputs.resolve import resolve
from specsize.engines import resolve_profile
from specsize.planner.plan import plan

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
SEARCHES = sorted((ROOT / "examples" / "search").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_plans(path):
    inputs = resolve(load_request(path))
    result = plan(inputs.deployment, inputs.workload, resolve_profile(), inputs.request.headroom)
    assert result.verdict.verdict in ("fits", "thin", "does_not_fit")
    assert not inputs.workload_defaulted


def test_default_matches_its_example():
    example = read_yaml_file(Path(EXAMPLES[0]).with_name("llama70b-draft1b-4xh100.yaml"))
    default = default_deployment()
    default.pop("name")
    assert default == example


@pytest.mark.parametrize("path", SEARCHES, ids=lambda p: p.name)
def test_search_example_screens(path):
    from specsize.catalog.gpus import load_efficiency
    from specsize.inputs.search_spec import read_search_spec
    from specsize.planner.search import run_search

    result = run_search(read_search_spec(str(path)), resolve_profile(), load_efficiency)
    assert result.screened > 1000 and result.cheapest is not None
