"""Stop 56: fixes made outside the helpers' files."""
import json

from tests.helpers import run_cli


def test_the_one_draft_profiling_warning_is_vllms_alone(capsys):
    # vLLM builds whose profiling pass drafts one token per sequence leave the k-token rejection sampler out of their
    # pool; SGLang sizes its pool as f x free - weights whatever it profiles, so the warning has no SGLang meaning
    code, out, _ = run_cli(capsys, "plan", "--format", "json")
    assert code in (0, 1)
    assert any("drafts one token per sequence" in w for w in json.loads(out)["warnings"])
    code, out, _ = run_cli(capsys, "plan", "--engine", "sglang", "--format", "json")
    assert code in (0, 1)
    assert not any("drafts one token per sequence" in w for w in json.loads(out)["warnings"])
