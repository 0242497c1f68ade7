"""EMBER_DEBUG_DIR / ember.config.debug_dir: per-frame folders of every stage's dump, and index.html."""
import logging
import os
import subprocess
import sys

import torch

import ember
from ember import debug_dir, logs


def files_of(folder):
    return sorted(name for name in os.listdir(folder))


def read(path):
    with open(path) as file:
        return file.read()


def test_report_has_every_stage_per_frame_and_an_index(tmp_path):
    ember.reset()

    def f(x, y):
        z = (x * y).sin()
        ember.graph_break()
        return z.sum(dim=0) + 1

    compiled = ember.compile(f, backend="ember", dynamic=False)
    x, y = torch.randn(4, 3, requires_grad=True), torch.randn(4, 3)
    with ember.config.patch(debug_dir=str(tmp_path)):
        compiled(x, y).sum().backward()
        compiled(torch.randn(5, 3), y[:1])  # recompiles: another size
    runs = os.listdir(tmp_path)
    assert len(runs) == 1 and runs[0].startswith("run_") and f"pid{os.getpid()}" in runs[0]
    run = tmp_path / runs[0]
    frames = [name for name in files_of(run) if name != "index.html"]
    assert frames[0].startswith("001_f") and any("__resume" in name or "resume" in name for name in frames), frames
    first = run / frames[0]
    text = {name: read(first / name) for name in files_of(first)}
    channels = {name.split("_", 1)[1][:-4] for name in text}
    assert {"graph_breaks", "bytecode", "guards", "graph_code", "ir", "schedule", "output_code",
            "perf"} <= channels, channels
    dumps = "\n".join(text.values())
    assert "graph for f" in dumps and "joint graph" in dumps and "backward graph" in dumps
    assert "kernels:" in dumps and "wrapper:" in dumps
    assert "ember.graph_break()" in dumps  # the break with its reason
    # the backward graphs compile at the first backward, outside any capture: a folder of their own
    (later,) = [name for name in frames if name.endswith("_after_f")]
    assert any(name.endswith("output_code.txt") for name in files_of(run / later))
    index = read(run / "index.html")
    assert "4 captured frames" in index  # f and its resume function, twice
    assert "recompiling f" in index and "size" in index  # the recompile and its reason, inline
    assert "captured f in" in index  # a stage's time, inline
    for frame in frames:
        for name in files_of(run / frame):
            assert f"{frame}/{name}" in index  # every file is linked
    # the channels are as they were: nothing is on once the report is switched off
    compiled(torch.randn(6, 3), y[:1])  # a capture with no folder configured uninstalls the sink
    assert not logs.enabled("ir") and debug_dir.run_folder() is None


def test_no_folder_no_report_and_logging_untouched(tmp_path, monkeypatch):
    monkeypatch.delenv("EMBER_DEBUG_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    compiled = ember.compile(lambda x: x.cos(), backend="eager")
    compiled(torch.randn(2))
    assert os.listdir(tmp_path) == []
    assert logs.get("graph_code").level == logging.NOTSET or not logs.enabled("graph_code")


def test_environment_variable_writes_the_report(tmp_path):
    script = ("import torch, ember\n"
              "f = ember.compile(lambda x: x.relu() * 2, backend='aot_eager')\n"
              "f(torch.randn(3))\n")
    env = dict(os.environ, EMBER_DEBUG_DIR=str(tmp_path))
    subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True)
    (run,) = os.listdir(tmp_path)
    index = read(tmp_path / run / "index.html")
    assert "001_" in index and "graph for" in index and "joint graph" in index and "AOT: traced" in index


def test_torch_compile_graphs_get_a_folder_each(tmp_path):
    import torch._dynamo

    torch._dynamo.reset()
    with ember.config.patch(debug_dir=str(tmp_path)):
        from ember.backends.torch_compile import ember as backend  # (installed or not: the callable)

        f = torch.compile(lambda x: x.exp() + 1, backend=backend)
        f(torch.randn(3))
        folder = debug_dir.run_folder()
        frames = [name for name in files_of(folder) if name != "index.html"]
        assert frames and frames[0].endswith("torch.compile_graph")
        assert any(name.endswith("output_code.txt") for name in files_of(os.path.join(folder, frames[0])))
    torch._dynamo.reset()
    debug_dir._sync()  # (no ember capture follows here: switch the report off for the tests after this one)
    assert debug_dir.run_folder() is None


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(level=logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)


def test_a_report_switched_off_late_leaves_a_channels_own_level_alone(tmp_path):
    # A report is switched off at the next capture after its folder is cleared.  That capture may
    # come after a program set a channel's level itself: the report must not undo it (it once
    # restored every channel's level from before the report, and the channel went silent).
    with ember.config.patch(debug_dir=str(tmp_path)):
        ember.compile(lambda x: x.exp() + 1, backend="eager")(torch.randn(3))
    assert debug_dir.run_folder() is not None  # (still on: no capture since the folder was cleared)
    logger, handler = logs.get("graph_code"), _Records()
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        ember.compile(lambda x: x.cos() * 2, backend="eager")(torch.randn(3))
        assert debug_dir.run_folder() is None and logger.level == logging.DEBUG
        assert handler.records and "cos" in handler.records[0].getMessage()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert not logs.enabled("graph_code") or old_level == logging.DEBUG
