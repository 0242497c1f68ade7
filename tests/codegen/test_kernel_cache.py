"""The on-disk kernel cache: broken libraries are rebuilt, concurrent builders never see partial files."""
import ctypes
import multiprocessing
import os
import subprocess
import sys
import uuid

import pytest
import torch

import ember
from ember.codegen.cpp import build as cpp_build


def _source(tag: str) -> str:
    # A fresh tag per test: this process has never dlopen'ed a library of that name.
    return (f"// test kernel {tag}\n"
            'extern "C" void add_one(float* x, long n) { for (long i = 0; i < n; ++i) x[i] += 1.0f; }\n')


def _check_runs(library: ctypes.CDLL) -> None:
    x = torch.zeros(5)
    library.add_one(ctypes.c_void_p(x.data_ptr()), ctypes.c_long(5))
    torch.testing.assert_close(x, torch.ones(5))


def test_truncated_cached_library_is_rebuilt_with_a_warning(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    source = _source(uuid.uuid4().hex)
    path = cpp_build.build(source)
    size = os.path.getsize(path)
    with open(path, "r+b") as handle:  # as a full disk or a killed copy leaves it
        handle.truncate(size // 3)
    with pytest.warns(UserWarning, match=r"could not be loaded .*deleted it and rebuilt it from source"):
        library = cpp_build.load(cpp_build.build(source))
    _check_runs(library)
    assert os.path.getsize(path) == size


def test_garbage_in_the_cache_is_rebuilt_too(tmp_path, monkeypatch):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    source = _source(uuid.uuid4().hex)
    path = cpp_build.build(source)
    with open(path, "wb") as handle:
        handle.write(b"not a shared library")
    with pytest.warns(UserWarning, match="rebuilt it from source"):
        _check_runs(cpp_build.load(path))


_SCRIPT = """
import torch, ember
f = ember.compile(lambda x: (x.sin() * 2).relu(), backend="ember")
x = torch.linspace(-3, 3, 64)
torch.testing.assert_close(f(x), (x.sin() * 2).relu())
print("ok")
"""


def test_a_later_run_survives_truncated_kernels_in_the_cache(tmp_path):
    # The child imports this checkout's ember, and whatever else the parent's path holds.
    environment = dict(os.environ, EMBER_CACHE_DIR=str(tmp_path),
                       PYTHONPATH=os.pathsep.join([os.getcwd(), *filter(None, [os.environ.get("PYTHONPATH")])]))
    first = subprocess.run([sys.executable, "-c", _SCRIPT], env=environment, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    libraries = [name for name in os.listdir(tmp_path) if name.endswith(".so")]
    assert libraries
    for name in libraries:
        with open(tmp_path / name, "r+b") as handle:
            handle.truncate(100)
    second = subprocess.run([sys.executable, "-c", _SCRIPT], env=environment, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert "rebuilt it from source" in second.stderr


def test_another_builder_rewriting_the_shared_source_does_not_break_a_build(tmp_path, monkeypatch):
    """While this process's g++ runs, another process (as before the fix) truncates and starts
    rewriting `k_<key>.cpp`: g++ must not be reading that file."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    source = _source(uuid.uuid4().hex)
    shared_source = tmp_path / f"k_{cpp_build._key(source)}.cpp"
    real_run = subprocess.run

    def run_while_another_builder_writes(command, **kwargs):
        shared_source.write_text("// half-written by another process\nextern \"C\" void add_")
        return real_run(command, **kwargs)

    monkeypatch.setattr(cpp_build.subprocess, "run", run_while_another_builder_writes)
    path = cpp_build.build(source)
    _check_runs(cpp_build.load(path))
    assert shared_source.read_text() == source
    assert sorted(os.listdir(tmp_path)) == sorted([os.path.basename(path), shared_source.name])


def _build_and_run(sources: list, barrier, results) -> None:
    try:
        barrier.wait(timeout=60)
        # build(), not build_all(): a forked child inherits the parent's thread pool without its threads.
        for path in [cpp_build.build(source) for source in sources]:
            _check_runs(ctypes.CDLL(path))
        results.put("ok")
    except BaseException as error:  # reported to the test process
        results.put(f"{type(error).__name__}: {error}")


def test_concurrent_processes_build_the_same_kernels(tmp_path, monkeypatch):
    """Real processes racing (the race itself is narrow: the test above forces its worst case)."""
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    sources = [_source(uuid.uuid4().hex) for _ in range(3)]
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(4), context.Queue()
    workers = [context.Process(target=_build_and_run, args=(sources, barrier, results))
               for _ in range(4)]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=300) for _ in workers]
    for worker in workers:
        worker.join(timeout=60)
    assert outcomes == ["ok"] * 4
    names = sorted(os.listdir(tmp_path))
    assert not [name for name in names if ".tmp" in name], names  # no temporary file left behind
    for source in sources:
        key = cpp_build._key(source)
        assert (tmp_path / f"k_{key}.cpp").read_text() == source
        assert f"k_{key}.so" in names


def test_cache_dir_is_a_setting_defaulting_to_the_environment_then_home(tmp_path, monkeypatch):
    with ember.config.patch(cache_dir=str(tmp_path / "chosen")):
        assert cpp_build.cache_dir() == str(tmp_path / "chosen")
        assert os.path.dirname(cpp_build.build(_source(uuid.uuid4().hex))) == str(tmp_path / "chosen")
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path / "from_env"))
    assert cpp_build.cache_dir() == str(tmp_path / "from_env")
    monkeypatch.delenv("EMBER_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cpp_build.cache_dir() == str(tmp_path / "home" / ".cache" / "ember")
