"""Command line: generate and check a seed range, summarize, minimize failures, write a report.

    python3 -m tests.fuzz.run --backend ember --seeds 0:500 [--mode default] [--jobs 1]
        [--minimize] [--results FILE.jsonl] [--report FILE.md] [--timeout 120]
    python3 -m tests.fuzz.run --show 17 --mode intmath      # print one program's source

Programs run in worker processes (a program that hangs or kills its process is recorded as
timeout/worker_died, and the run goes on). With --results, every outcome is appended to a JSONL
file as soon as it is known and seeds already there are skipped, so a long run can be stopped,
resumed, or split into seed slices that write separate files (pass several to --report-from).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import sys
import time

# Backends named *_triton run Triton kernels on CPU tensors in Triton's interpreter, which must
# be chosen before anything imports triton.  Not with EMBER_FUZZ_DEVICE=cuda: there every graph's
# kernels are Triton's, compiled for the GPU (the interpreter on CUDA tensors tests nothing real).
if "--backend" in " ".join(sys.argv) and "_triton" in " ".join(sys.argv) and \
        os.environ.get("EMBER_FUZZ_DEVICE", "cpu") == "cpu":
    os.environ.setdefault("TRITON_INTERPRET", "1")

from .report import summarize, write_report

DEFAULT_TIMEOUT = 120.0


def parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for part in text.split(","):
        if ":" in part:
            low, high = part.split(":")
            seeds.extend(range(int(low), int(high)))
        else:
            seeds.append(int(part))
    return seeds


# ---- worker side -------------------------------------------------------------------------------

def _worker(connection, threads: int | None, stderr_path: str | None) -> None:
    import warnings
    warnings.simplefilter("ignore")
    if stderr_path:
        # torch's C++ warnings (and g++ noise) would drown the progress lines.
        descriptor = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.dup2(descriptor, 2)
    import torch
    if threads:
        torch.set_num_threads(threads)
    from .generator import generate
    from .harness import Outcome, run_program
    from .localize import culprit
    from .minimize import evaluate_isolated, minimize
    while True:
        try:
            task = connection.recv()
        except EOFError:
            return
        kind = task["kind"]
        try:
            program = generate(task["seed"], task["mode"])
            if kind == "run":
                outcomes = run_program(program, task["backends"], task["raise_capture_errors"])
                rows = []
                for outcome in outcomes:
                    row = dataclasses.asdict(outcome)
                    if outcome.cls not in ("ok", "eager_error"):
                        row["source"] = program.source()
                        row["culprit"] = culprit(program, outcome)
                    rows.append(row)
                if _cuda_context_lost():
                    rows.append({"retire": True})
                connection.send(rows)
            elif kind == "localize":
                connection.send({"culprit": culprit(program, Outcome(**task["outcome"]))})
            else:
                recorded = Outcome(**task["outcome"])
                # Minimize against today's outcome: the harness may have changed since the run.
                target = (evaluate_isolated(program, recorded.backend) if recorded.cls == "worker_died"
                          else run_program(program, (recorded.backend,))[0])
                if target.cls not in ("wrong", "crash", "worker_died"):
                    connection.send({"no_longer_fails": target.cls})
                    continue
                small, outcome, spent = minimize(program, target, max_evaluations=task["max_evaluations"],
                                                 max_seconds=task["max_seconds"])
                connection.send({"mode": task["mode"], "seed": task["seed"], "backend": target.backend,
                                 "source": small.source(main_backend=target.backend), "ops": small.ops(),
                                 "statements": len(small.statements), "evaluations": spent,
                                 "outcome": dataclasses.asdict(outcome)})
        except Exception as error:  # noqa: BLE001 - a generator bug must not stop the run
            import traceback
            connection.send({"generator_error": f"{type(error).__name__}: {error}",
                             "trace": traceback.format_exc(limit=-6), "retire": _cuda_context_lost()})


def _cuda_context_lost() -> bool:
    """Did a device-side assert or a bad access end this process's CUDA context?  (Every later
    CUDA call would fail: the worker is replaced.)"""
    import torch

    if not torch.cuda.is_initialized():
        return False
    try:
        torch.cuda.synchronize()
        torch.zeros(1, device="cuda").item()
        return False
    except Exception:  # noqa: BLE001 - any CUDA error means the context is gone
        return True


class Pool:
    """Worker processes that each run one task at a time, killed and replaced on timeout or death."""

    def __init__(self, jobs: int, threads: int | None, stderr_path: str | None) -> None:
        self.context = multiprocessing.get_context("spawn")
        self.threads = threads
        self.stderr_path = stderr_path
        self.workers = [self._start() for _ in range(jobs)]

    def _start(self):
        parent, child = self.context.Pipe()
        process = self.context.Process(target=_worker, args=(child, self.threads, self.stderr_path),
                                       daemon=True)
        process.start()
        child.close()
        return {"process": process, "connection": parent, "task": None, "since": 0.0}

    def run(self, tasks, timeout: float, on_result) -> None:
        pending = list(tasks)
        while pending or any(worker["task"] for worker in self.workers):
            for index, worker in enumerate(self.workers):
                if worker["task"] is None and pending:
                    worker["task"] = pending.pop(0)
                    worker["since"] = time.perf_counter()
                    worker["connection"].send(worker["task"])
            multiprocessing.connection.wait([w["connection"] for w in self.workers if w["task"]], timeout=0.5)
            for index, worker in enumerate(self.workers):
                task = worker["task"]
                if task is None:
                    continue
                connection = worker["connection"]
                try:
                    if connection.poll():
                        result = connection.recv()
                        worker["task"] = None
                        retire = isinstance(result, dict) and result.pop("retire", False)
                        if isinstance(result, list) and result and result[-1] == {"retire": True}:
                            retire = bool(result.pop())
                        on_result(task, result)
                        if retire:  # its CUDA context is gone: a fresh worker
                            worker["process"].kill()
                            worker["process"].join()
                            self.workers[index] = self._start()
                        continue
                except (EOFError, ConnectionResetError):
                    pass
                process = worker["process"]
                elapsed = time.perf_counter() - worker["since"]
                if not process.is_alive() or elapsed > timeout:
                    died = not process.is_alive()
                    code = process.exitcode
                    process.kill()
                    process.join()
                    self.workers[index] = self._start()
                    on_result(task, {"lost": "worker_died" if died else "timeout",
                                     "detail": f"exit code {code}" if died else f"over {timeout:.0f} s"})

    def close(self) -> None:
        for worker in self.workers:
            worker["connection"].close()   # the worker's recv() ends, and so does the worker
        for worker in self.workers:
            worker["process"].join(timeout=10)
            if worker["process"].is_alive():
                worker["process"].kill()
                worker["process"].join()


# ---- parent side ------------------------------------------------------------------------------

def load_rows(path: str | None) -> list[dict]:
    if not path or not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _append(path: str | None, row: dict) -> None:
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps(row) + "\n")


def _lost_rows(task: dict, result: dict) -> list[dict]:
    return [{"seed": task["seed"], "mode": task["mode"], "backend": backend, "cls": result["lost"], "check": None,
             "where": None, "detail": result["detail"], "exception": None, "type_match": None, "ops": [],
             "seconds": 0.0, "trace": ""} for backend in task["backends"]]


def run_seeds(arguments, rows: list[dict]) -> list[dict]:
    done = {(row["mode"], row["seed"], row["backend"]) for row in rows}
    tasks = []
    for mode in arguments.modes:
        for seed in arguments.seed_list:
            if all((mode, seed, backend) in done for backend in arguments.backends):
                continue
            tasks.append({"kind": "run", "seed": seed, "mode": mode, "backends": arguments.backends,
                          "raise_capture_errors": not arguments.no_raise_capture_errors})
    if not tasks:
        return rows
    started = time.perf_counter()
    count = [0]

    def on_result(task, result):
        count[0] += 1
        if isinstance(result, dict) and "generator_error" in result:
            new = [{"seed": task["seed"], "mode": task["mode"], "backend": backend, "cls": "generator_error",
                    "check": None, "where": None, "detail": result["generator_error"], "exception": None,
                    "type_match": None, "ops": [], "seconds": 0.0, "trace": result["trace"]}
                   for backend in task["backends"]]
        elif isinstance(result, dict):
            new = _lost_rows(task, result)
        else:
            new = result
        for row in new:
            rows.append(row)
            _append(arguments.results, row)
            if row["cls"] not in ("ok", "eager_error") and not arguments.quiet:
                what = row.get("exception") or f"{row.get('check')}: {row.get('detail', '')[:110]}"
                print(f"  {row['mode']} seed {row['seed']} {row['backend']}: {row['cls']} {what}", flush=True)
        if count[0] % 50 == 0 or count[0] == len(tasks):
            print(f"[{count[0]}/{len(tasks)} programs, {time.perf_counter() - started:.0f} s]", flush=True)

    pool = Pool(arguments.jobs, arguments.threads, arguments.worker_stderr)
    try:
        pool.run(tasks, arguments.timeout, on_result)
    finally:
        pool.close()
    return rows


OUTCOME_FIELDS = ("seed", "mode", "backend", "cls", "check", "where", "detail", "exception", "type_match", "ops",
                  "seconds", "trace")


def localize_failures(arguments, rows: list[dict]) -> None:
    """Find the culprit statement of failures recorded without one (results of older runs)."""
    todo = [row for row in rows if row["cls"] in ("wrong", "crash") and "culprit" not in row]
    if not todo:
        return
    print(f"localizing {len(todo)} failures", flush=True)
    tasks = [{"kind": "localize", "seed": row["seed"], "mode": row["mode"], "backends": [row["backend"]],
              "outcome": {k: row[k] for k in OUTCOME_FIELDS}, "row": index} for index, row in enumerate(todo)]

    def on_result(task, result):
        todo[task["row"]]["culprit"] = result.get("culprit")

    pool = Pool(arguments.jobs, arguments.threads, arguments.worker_stderr)
    try:
        pool.run(tasks, arguments.timeout, on_result)
    finally:
        pool.close()
    if arguments.results:
        temporary = arguments.results + ".tmp"
        with open(temporary, "w") as handle:
            handle.writelines(json.dumps(row) + "\n" for row in rows)
        os.replace(temporary, arguments.results)


def minimize_failures(arguments, rows: list[dict], minimized: list[dict]) -> list[dict]:
    """Minimize up to --minimize-limit failures per (backend, coarse signature) not minimized yet."""
    from .report import coarse_signature
    have = {(row["mode"], row["seed"], row["backend"]) for row in minimized}
    per_group: dict = {}
    tasks = []
    for row in sorted(rows, key=lambda r: (r["mode"] != "default", r["seed"])):
        if row["cls"] not in ("wrong", "crash", "worker_died"):
            continue
        group = (row["backend"], coarse_signature(row))
        key = (row["mode"], row["seed"], row["backend"])
        per_group.setdefault(group, 0)
        if key in have:
            per_group[group] += 1
            continue
        if per_group[group] >= arguments.minimize_limit:
            continue
        per_group[group] += 1
        outcome = {k: row[k] for k in OUTCOME_FIELDS}
        tasks.append({"kind": "minimize", "seed": row["seed"], "mode": row["mode"], "backends": [row["backend"]],
                      "outcome": outcome, "max_evaluations": arguments.max_evaluations,
                      "max_seconds": arguments.max_minimize_seconds})
    if not tasks:
        return minimized
    print(f"minimizing {len(tasks)} failures", flush=True)

    def on_result(task, result):
        if "source" not in result:
            print(f"  could not minimize {task['mode']} seed {task['seed']}: {result}", flush=True)
            return
        minimized.append(result)
        _append(arguments.minimized, result)
        print(f"  minimized {task['mode']} seed {task['seed']} {result['backend']}: {result['statements']} statements, "
              f"ops {', '.join(result['ops'])}", flush=True)

    pool = Pool(arguments.jobs, arguments.threads, arguments.worker_stderr)
    try:
        pool.run(tasks, arguments.max_minimize_seconds * 2 + 120, on_result)
    finally:
        pool.close()
    return minimized


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="ember", help="one or several, comma separated (ember,aot_eager)")
    parser.add_argument("--seeds", default="0:100", help="A:B (half open), or a comma list of seeds and ranges")
    parser.add_argument("--mode", default="default", help="a mode, a comma list, or 'all' (see modes.py)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None, help="torch threads per worker")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per program")
    parser.add_argument("--results", help="JSONL of outcomes: appended to, and seeds in it are skipped")
    parser.add_argument("--report-from", nargs="*", default=[], help="more JSONL files to include in the summary")
    parser.add_argument("--localize", action="store_true",
                        help="name the culprit statement of failures recorded without one (implied by --minimize)")
    parser.add_argument("--minimize", action="store_true")
    parser.add_argument("--minimize-limit", type=int, default=2, help="failures minimized per signature")
    parser.add_argument("--max-evaluations", type=int, default=120)
    parser.add_argument("--max-minimize-seconds", type=float, default=300.0)
    parser.add_argument("--minimized", help="JSONL of minimized failures (default: RESULTS.min.jsonl)")
    parser.add_argument("--report", help="write a markdown report here")
    parser.add_argument("--show", type=int, help="print the program of this seed and exit")
    parser.add_argument("--no-raise-capture-errors", action="store_true",
                        help="let ember fall back to eager on internal capture errors (hides them)")
    parser.add_argument("--worker-stderr", default=os.devnull,
                        help="where workers' stderr goes (torch's C++ warnings; default: discarded)")
    parser.add_argument("--quiet", action="store_true")
    arguments = parser.parse_args(argv)
    from .modes import MODES, get_mode
    arguments.modes = list(MODES) if arguments.mode == "all" else arguments.mode.split(",")
    for mode in arguments.modes:
        get_mode(mode)
    if arguments.show is not None:
        from .generator import generate
        print(generate(arguments.show, arguments.modes[0]).source(main_backend=arguments.backend.split(",")[0]))
        return 0
    arguments.backends = arguments.backend.split(",")
    arguments.seed_list = parse_seeds(arguments.seeds)
    if arguments.minimized is None and arguments.results:
        arguments.minimized = arguments.results.replace(".jsonl", "") + ".min.jsonl"
    rows = run_seeds(arguments, load_rows(arguments.results))
    if arguments.localize or arguments.minimize:
        localize_failures(arguments, rows)
    for path in arguments.report_from:
        rows = rows + load_rows(path)
    wanted, seeds = set(arguments.modes), set(arguments.seed_list)
    selected = [row for row in rows if row["mode"] in wanted and row["backend"] in arguments.backends
                and (row["seed"] in seeds or arguments.report_from)]
    minimized = load_rows(arguments.minimized)
    for path in arguments.report_from:
        minimized.extend(load_rows(path.replace(".jsonl", "") + ".min.jsonl"))
    if arguments.minimize:
        minimized = minimize_failures(arguments, selected, minimized)
    print(summarize(selected, minimized))
    if arguments.report:
        write_report(arguments.report, selected, minimized, " ".join(sys.argv[1:] if argv is None else argv))
        print(f"report written to {arguments.report}")
    failing = [row for row in selected if row["cls"] in ("wrong", "crash", "timeout", "worker_died")]
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
