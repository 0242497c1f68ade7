"""The benchmark tools themselves: capture_counts' op counts, profile_steps' command line."""
import os
import subprocess
import sys

import torch

import ember

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import capture_counts  # noqa: E402  (benchmarks/capture_counts.py)


def test_capture_counts_finds_no_ops_outside_the_graphs_of_a_model_captured_whole():
    result = capture_counts.measure("ember", "mlp")
    assert result["graphs"] == 1 and result["breaks"] == 0
    assert result["aten_inside"] > 0
    assert result["aten_outside"] == 0  # (it counted every op: ember ran eagerly under the mode)


@ember.disable
def _doubled(x):
    return x * 2


class _WithEagerStep(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(32, 4)

    def forward(self, x):
        return _doubled(self.fc(x)).relu()


def test_capture_counts_counts_the_ops_that_ran_outside_every_graph(monkeypatch):
    monkeypatch.setattr(capture_counts, "build", lambda name: _WithEagerStep().eval())
    result = capture_counts.measure("ember", "mlp")
    assert result["graphs"] == 2
    assert result["aten_outside"] == 1  # the disabled function's mul


def test_profile_steps_help_prints_the_usage():
    script = os.path.join(REPO, "benchmarks", "profile_steps.py")
    done = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout and "training" in done.stdout
    done = subprocess.run([sys.executable, script], capture_output=True, text=True)
    assert done.returncode == 2 and "required" in done.stderr and "Traceback" not in done.stderr
