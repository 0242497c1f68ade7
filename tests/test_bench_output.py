"""`ember bench` and the benchmark scripts write where the user says, never into the checkout by default."""
import os
import sys

import pytest

from ember import cli

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import output  # noqa: E402  (benchmarks/output.py)


def _recorded_calls(monkeypatch) -> list:
    calls = []
    monkeypatch.setattr(cli.subprocess, "call", lambda command: calls.append(command) or 0)
    return calls


def test_bench_passes_the_chosen_folder_to_every_script(tmp_path, monkeypatch):
    calls = _recorded_calls(monkeypatch)
    assert cli.main(["bench", "--out", str(tmp_path / "mine")]) == 0
    assert [os.path.basename(command[1]) for command in calls] == list(cli.BENCHMARKS)
    assert all(command[2:] == ["--out", str(tmp_path / "mine")] for command in calls)
    assert (tmp_path / "mine").is_dir()


def test_bench_default_folder_is_in_the_current_directory_not_the_checkout(tmp_path, monkeypatch):
    calls = _recorded_calls(monkeypatch)
    monkeypatch.chdir(tmp_path)
    cli.main(["bench", "overhead.py"])
    assert len(calls) == 1 and calls[0][2:] == ["--out", str(tmp_path / "ember-bench-results")]
    assert not calls[0][3].startswith(os.path.join(REPO, "benchmarks"))


def test_bench_rejects_an_unknown_benchmark(monkeypatch, capsys):
    _recorded_calls(monkeypatch)
    with pytest.raises(SystemExit):
        cli.main(["bench", "nope.py"])
    assert "unknown benchmark" in capsys.readouterr().err


def test_scripts_take_out_and_default_outside_the_checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["script.py", "--table-only", "--out", "chosen"]
    assert output.take_out_option(argv) == str(tmp_path / "chosen") and argv == ["script.py", "--table-only"]
    argv = ["script.py", "--out=other"]
    assert output.take_out_option(argv) == str(tmp_path / "other") and argv == ["script.py"]
    assert output.take_out_option(["script.py"]) == str(tmp_path / "ember-bench-results")


@pytest.mark.parametrize("script", ["capture_counts.py", "overhead.py", "partition_bytes.py", "codegen_speed.py"])
def test_no_script_writes_into_benchmarks_results_by_itself(script):
    text = open(os.path.join(REPO, "benchmarks", script)).read()
    assert "take_out_option()" in text
    assert '"results"' not in text  # the committed folder is only reached through --out

