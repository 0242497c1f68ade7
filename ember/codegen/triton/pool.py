"""Compiling a graph's Triton kernels in worker processes.

Threads alone left cold compiles GIL-bound (Triton's front end and MLIR passes hold the
interpreter: a training graph's ~250 kernels took ~25 s on a 16-core GPU host).  Workers compile
the kernels into Triton's on-disk cache; the parent then compiles each kernel as before
(`TritonLauncher.precompile`) and finds it there.  The hand-over: the parent runs Triton's own
warm-up with `knobs.runtime.jit_cache_hook` set, which receives the specialization Triton would
compile (as JSON) and skips compiling; a worker rebuilds the same source from it, as
`JITFunction.preload` does, and compiles it for the parent's GPU target (no GPU needed).  A
kernel a worker fails on is compiled by the parent, which reports the error.
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time

from ... import config as ember_config
from ... import logs

log_perf = logs.get("perf")

MIN_KERNELS = 8  # fewer kernels than this compile in the parent's threads (no hand-over cost)
WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")


def workers_enabled() -> bool:
    return _workers_wanted() > 0 and os.environ.get("TRITON_INTERPRET") != "1"


def _workers_wanted() -> int:
    return ember_config._config.compile_workers  # (ember.config.compile_workers: 0 turns them off)


class Worker:
    """One compile process, started from its own script: Python's multiprocessing would import
    the parent's __main__ in each (a benchmark's: torch, transformers; seconds per worker)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, WORKER_SCRIPT], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.lock = threading.Lock()  # one job at a time (batches of two graphs share the workers)

    def run(self, job: list) -> str:
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        return answer.rstrip("\n") if answer else "the worker exited"

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.alive():
            self.process.stdin.close()
            self.process.terminate()


_workers: list[Worker] = []
_lock = threading.Lock()
_stop_at_exit = []


def _pool(count: int) -> list[Worker]:
    """The process-wide workers (started on first use, restarted if one died)."""
    with _lock:
        _workers[:] = [worker for worker in _workers if worker.alive()]
        if not _stop_at_exit:
            _stop_at_exit.append(atexit.register(shutdown))
        while len(_workers) < count:
            _workers.append(Worker())
        return list(_workers[:count])


def prewarm() -> None:
    """Starts the workers now, without waiting for them: each imports Triton's compiler while the
    parent lowers and schedules its first graph (a second or two of every cold compile)."""
    if workers_enabled() and ember_config._config.compile_prewarm:
        _pool(_workers_wanted())


def shutdown() -> None:
    with _lock:
        for worker in _workers:
            worker.stop()
        _workers.clear()


def run_jobs(jobs: list[list], count: int | None = None) -> list[str]:
    """Each job's answer ("ok" or the error), the jobs spread over the workers."""
    return Batch(jobs, count).wait()


class Batch:
    """Jobs handed to the workers, answered in the background: a graph's kernels compile while
    the parent lowers the next graph (a training step's backward while its forward compiles).
    Batches share the workers, one job per worker at a time."""

    def __init__(self, jobs: list[list], count: int | None = None) -> None:
        self.jobs = jobs
        self.answers = ["not run"] * len(jobs)
        self.seconds = [0.0] * len(jobs)
        self.pending: queue.Queue = queue.Queue()
        for position, job in enumerate(jobs):
            self.pending.put((position, job))
        workers = _pool(min(count or _workers_wanted(), len(jobs))) if jobs else []
        self.threads = [threading.Thread(target=self._serve, args=(worker,), daemon=True) for worker in workers]
        for thread in self.threads:
            thread.start()

    def _serve(self, worker: Worker) -> None:
        while True:
            try:
                position, job = self.pending.get_nowait()
            except queue.Empty:
                return
            with worker.lock:
                started = time.perf_counter()
                self.answers[position] = worker.run(job)
                self.seconds[position] = time.perf_counter() - started

    def wait(self) -> list[str]:
        for thread in self.threads:
            thread.join()
        if self.jobs and log_perf.isEnabledFor(logging.DEBUG):
            slowest = sorted(range(len(self.jobs)), key=self.seconds.__getitem__, reverse=True)[:3]
            log_perf.debug("slowest compiles in the workers: %s", ", ".join(
                f"{self.jobs[k][1]} {self.seconds[k]:.1f} s ({self.jobs[k][0]})" for k in slowest))
        return self.answers


def specializations(launchers: list) -> list[tuple[str, str, str]]:
    """(kernel file, function name, specialization JSON) for each distinct compile the launchers'
    warm-ups would do, found without compiling."""
    from triton import knobs

    found: dict[str, tuple[str, str, str]] = {}

    def capture(*, key, fn, compile, **_):
        function = fn.jit_function
        data = compile["specialization_data"]
        found.setdefault(function.ember_path + data, (function.ember_path, function.fn.__name__, data))
        return True  # (skip compiling here)

    previous = knobs.runtime.jit_cache_hook
    knobs.runtime.jit_cache_hook = capture
    try:
        for launcher in launchers:
            try:
                launcher.precompile()
            except Exception:  # noqa: BLE001 (the parent's own compile reports it)
                pass
            launcher.pending = None
    finally:
        knobs.runtime.jit_cache_hook = previous
    return list(found.values())


def start_in_workers(launchers: list) -> Batch | None:
    """Hands the launchers' kernels to the workers (None: too few, or no workers); they compile
    into Triton's cache while the caller goes on."""
    if not workers_enabled() or len(launchers) < MIN_KERNELS:
        return None
    from triton.runtime.driver import driver

    target = driver.active.get_current_target()
    jobs = [[path, name, data, [target.backend, target.arch, target.warp_size]]
            for path, name, data in specializations(launchers)]
    return Batch(jobs)


def finish_in_workers(batch: Batch | None) -> None:
    if batch is None:
        return
    answers = batch.wait()
    failed = [answer for answer in answers if answer != "ok"]
    if failed:
        log_perf.debug("%d of %d kernels failed in the compile workers (the parent compiles them): %s",
                       len(failed), len(batch.jobs), failed[0])


class CacheCounter:
    """Counts Triton's compiles that found their kernel in the cache and those that did not
    (how well the workers' hand-over worked), while installed as the compilation listener."""

    def __init__(self) -> None:
        self.hits = 0
        self.misses = 0

    def __call__(self, *, cache_hit: bool, **_) -> None:
        if cache_hit:
            self.hits += 1
        else:
            self.misses += 1

    def __enter__(self) -> "CacheCounter":
        from triton import knobs

        self.previous = knobs.compilation.listener
        knobs.compilation.listener = self
        return self

    def __exit__(self, *exc) -> None:
        from triton import knobs

        knobs.compilation.listener = self.previous


last_counts: dict[str, int] = {}  # the last graph's {"hits", "misses", "kernels"} (tests read it)
