"""Keep it closed: for any value outside a field's declared range, any non-finite number, any garbage or oversized
file, every command exits 2 with one line naming the field, within bounded time and memory.

The field values are generated from the field table itself (specsize.inputs.request), so a new field is fuzzed
the day it is declared."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specsize.cli.main import main
from specsize.inputs.fields import flag_of
from specsize.inputs.request import FIELDS, info

COMMAND_FOR_GROUP = {"deployment": "plan", "workload": "plan", "acceptance": "plan", "perf": "plan",
                     "analysis": "plan", "simulation": "simulate", "speedup": "speedup"}
NUMERIC = [name for name in FIELDS if info(name).kind in ("int", "float", "int_list") and flag_of(name, info(name))]
CHOICES = [name for name in FIELDS if info(name).kind == "choice" and flag_of(name, info(name))]


def _bad_numbers(name: str):
    fi = info(name)
    bad = [st.sampled_from(["nan", "inf", "-inf", "abc", "1e999", ""])]
    if fi.minimum is not None:
        below = fi.minimum if fi.exclusive_minimum else fi.minimum - (1 if fi.kind != "float" else 1e-6)
        bad.append(st.floats(max_value=below, allow_nan=False, allow_infinity=False, min_value=-1e12)
                   .map(lambda v: str(math.floor(v)) if fi.kind != "float" else repr(v)))
    if fi.maximum is not None:
        above = fi.maximum if fi.exclusive_maximum else fi.maximum + (1 if fi.kind != "float" else 1e-6)
        bad.append(st.floats(min_value=above, max_value=1e30, allow_nan=False)
                   .map(lambda v: str(math.ceil(v)) if fi.kind != "float" else repr(v)))
    return st.one_of(*bad)


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def _one_line_naming(err: str, name: str) -> bool:
    lines = [line for line in err.splitlines() if line.startswith("specsize: error:")]
    flag = flag_of(name, info(name)) or ""
    return len(lines) == 1 and (f"{name}" in lines[0] or flag in lines[0] or name.replace("_", "-") in lines[0])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_out_of_range_and_non_finite_values_are_bad_input(data, capsys):
    name = data.draw(st.sampled_from(NUMERIC))
    value = data.draw(_bad_numbers(name))
    command = COMMAND_FOR_GROUP[info(name).group]
    flag = flag_of(name, info(name))
    start = time.monotonic()
    code, out, err = _run([command, f"{flag}={value}", "--acceptance-rate", "0.7"] if name != "acceptance_rate"
                          else [command, f"{flag}={value}"], capsys)
    assert code == 2, (name, value, err)
    assert _one_line_naming(err, name), (name, value, err)
    assert "Traceback" not in err and (out == "" or command != "plan")
    assert time.monotonic() - start < 20


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_unknown_choices_are_bad_input(data, capsys):
    name = data.draw(st.sampled_from(CHOICES))
    value = data.draw(st.text(alphabet="abcxyz0189_-", min_size=1, max_size=8)
                      .filter(lambda v: v not in (info(name).choices or ())))
    code, _, err = _run([COMMAND_FOR_GROUP[info(name).group], f"{flag_of(name, info(name))}={value}"], capsys)
    assert code == 2 and _one_line_naming(err, name), (name, value, err)


GARBAGE = {
    "binary": lambda: os.urandom(4096),
    "truncated_yaml": lambda: b"target: meta-llama/Llama-3.1-8B-Instruct\nworkload: {prompt_tokens: {p50: 1",
    "wrong_shape": lambda: b"- a\n- b\n",
    "numbers_as_text": lambda: b"prompt_tokens,output_tokens\nlots,many\n",
    "json_nan": lambda: b'{"arrival_time": NaN, "prompt_tokens": 1, "output_tokens": 1}\n',
    "header_only": lambda: b"arrival_time,prompt_tokens,output_tokens\n",
}
USES = {  # (command line with {f} for the file, field named in the error)
    "deployment": (["plan", "{f}"], "deployment"),
    "samples": (["plan", "--samples-file", "{f}"], "samples_file"),
    "prompt_samples": (["plan", "--prompt-tokens", "@{f}"], "prompt_tokens"),
    "trace": (["simulate", "--trace", "{f}", "--acceptance-rate", "0.7"], "trace"),
    "lengths": (["simulate", "--lengths-file", "{f}", "--acceptance-rate", "0.7"], "lengths_file"),
    "plan": (["check-live", "--plan", "{f}", "--metrics", "{f}"], "plan"),
    "search": (["search", "{f}"], "search"),
    "config": (["plan", "--target", "{f}", "--gpu", "H100-SXM-80GB"], "config"),
}


@pytest.mark.parametrize("use", sorted(USES))
@pytest.mark.parametrize("garbage", sorted(GARBAGE))
def test_garbage_files_are_bad_input(use, garbage, tmp_path, capsys):
    if garbage == "json_nan" and use in ("samples", "prompt_samples", "lengths"):
        pytest.skip("valid lengths: the NaN is in an arrival time, which token samples and lengths files do not read")
    path = tmp_path / ("config.json" if use == "config" else "input")
    path.write_bytes(GARBAGE[garbage]())
    argv, _ = USES[use]
    code, _, err = _run([part.replace("{f}", str(path)) for part in argv], capsys)
    assert code == 2, (use, garbage, err)
    errors = [line for line in err.splitlines() if line.startswith("specsize: error:")]
    assert len(errors) == 1 and "Traceback" not in err and "internal error" not in err, (use, garbage, err)


def test_oversized_inputs_end_in_bounded_time_and_memory(tmp_path):
    """A 300 MiB file (sparse: no disk used) and /dev/zero, under a 2 GiB address-space limit: exit 2 quickly."""
    big = tmp_path / "big.csv"
    with big.open("wb") as handle:
        handle.truncate(300 * 2**20)
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30)); "
    for argv in (["plan", "--samples-file", str(big)], ["plan", "--prompt-tokens", "@/dev/zero"],
                 ["plan", str(big)], ["simulate", "--trace", "/dev/zero", "--acceptance-rate", "0.7"],
                 ["plan", "--gpus", "1000000000000"], ["simulate", "--rate", "1e9", "--acceptance-rate", "0.7"]):
        start = time.monotonic()
        done = subprocess.run([sys.executable, "-c", limit + "from specsize.cli.main import main; main()", *argv],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, (argv, done.stderr[-500:])
        assert done.stderr.strip().splitlines()[-1].startswith("specsize: error:"), argv
        assert time.monotonic() - start < 60, argv


def test_no_non_finite_number_reaches_json(capsys):
    import json

    code, out, _ = _run(["plan", "--format", "json", "--step-overhead-ms", "1e4", "--acceptance-rate", "0.7"], capsys)
    assert code == 0
    json.loads(out, parse_constant=lambda c: pytest.fail(f"non-finite {c} in the JSON"))


def test_the_fuzzed_fields_are_the_declared_ones():
    assert {"tp", "concurrency", "burst_factor", "rate", "duration", "batch_sizes", "gpu_memory_gib"} <= set(NUMERIC)
    assert Path(__file__).exists()
