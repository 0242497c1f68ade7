"""Run PyTorch's own Dynamo test file `test/dynamo/test_functions.py` with ember in place of
torch.compile / TorchDynamo, and report every test's outcome.

    python3 -m tests.peer.run_dynamo --out /tmp/peer.md          # the whole file, markdown report
    python3 -m tests.peer.run_dynamo -k partials --out /tmp/p.md  # only tests whose name has "partials"
    python3 -m tests.peer.run_dynamo --reference                  # torch.compile itself (no ember)

The test file is PyTorch's (BSD licensed), read from pytorch/pytorch at commit
0014f2167fd77588eec64d39ef4428e95c614e46 and kept verbatim at tests/peer/dynamo/test_functions.py
(see tests/peer/dynamo/README.md: it is not committed here).

For the run, `install_ember_shim()` replaces what the file compiles with:

    torch.compile(fn, backend=, fullgraph=, dynamic=, mode=, options=)  -> ember.compile(...)
    torch._dynamo.optimize(backend, nopython=, dynamic=, disable=)       -> ember.compile(fullgraph=nopython)
    torch._dynamo.optimize_assert(backend, dynamic=)                      -> ember.compile(fullgraph=True)
    torch._dynamo.reset()                                                 -> ember.reset() + torch's reset
    torch._dynamo.graph_break / torch._dynamo.disable                    -> ember.graph_break / ember.disable

(also the copies of optimize_assert/reset that torch._dynamo.testing and test_case imported by
name: `standard_test`, behind `make_test`, calls those).  A backend given as a callable
(CompileCounter, EagerAndRecordGraphs, ...) is handed to ember.compile as is, so the counters
count ember's graphs; a string backend is ember's backend of that name; torch.compile's default
backend ("inductor", or none given) becomes --default-backend (ember's own "ember" by default).
torch._dynamo.config.capture_scalar_outputs and error_on_recompile are honoured (the first as
ember's option of that name, the second by raising when a call recompiles), and
`torch._dynamo.exc.Unsupported` also matches ember.CaptureError (ember's fullgraph break) in
`assertRaises`, and `UserError` / `InternalTorchDynamoError` / `TorchRuntimeError` (Dynamo's wrappers of an exception
the user's code raised while tracing) also match a builtin exception: ember lets the user's own
exception propagate, as eager raises it.

Outcomes: passed; wrong value (a failed assertion on values); count mismatch (a failed
assertion on frame_count/op_count, Dynamo's exact numbers); graph text (assertExpectedInline
on Dynamo's printed graph); exception mismatch (an assertRaises that ember did not satisfy);
break (ember.CaptureError: a graph break under fullgraph); error (anything else ember or the
test raised); skipped; xfail (an upstream @expectedFailure that failed here too).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import importlib.util
import io
import json
import os
import signal
import sys
import time
import traceback
import types
import unittest
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEST_FILE = HERE / "dynamo" / "test_functions.py"
TEST_MODULE = "tests.peer.dynamo.test_functions"  # its tests look for "test" in __module__
UPSTREAM = ("pytorch/pytorch", "test/dynamo/test_functions.py", "0014f2167fd77588eec64d39ef4428e95c614e46")

PASSED, WRONG, COUNT, GRAPH_TEXT, EXC_MISMATCH, BREAK, ERROR, SKIPPED, XFAIL, XPASS, NA = (
    "passed", "wrong value", "count mismatch", "graph text", "exception mismatch", "break", "error",
    "skipped", "xfail", "xpass", "n/a")
CATEGORIES = (PASSED, WRONG, COUNT, GRAPH_TEXT, EXC_MISMATCH, BREAK, ERROR, SKIPPED, XFAIL, XPASS, NA)
_SEVERITY = {c: i for i, c in enumerate((NA, PASSED, XPASS, XFAIL, SKIPPED, GRAPH_TEXT, COUNT, EXC_MISMATCH,
                                           BREAK, ERROR, WRONG))}

# What torch.compile itself (torch 2.13.0 CPU, `--reference`, default backend "eager") does with
# this version of the file: the file is a little older than torch 2.13, so these few do not
# pass under Dynamo either.
REFERENCE_NON_PASS = {
    "FunctionTests.test_indexed_range": "error: RangeVariable.apply_index() changed signature (Dynamo internals)",
    "FunctionTests.test_reduce_with_single": "count mismatch: Dynamo 2.13 makes a graph (expected 0)",
    "FunctionTests.test_truth": "error: Unsupported: Failed to trace builtin operator",
    "DefaultsTests.test_zip_strict": "exception mismatch: Unsupported (Observed exception), test expects UserError",
    "FunctionTests.test_partials_hasattr_set_attr": "xfail (upstream @expectedFailure)",
}


# ---------------------------------------------------------------------------------------------
# Compatibility with the torch that is installed
# ---------------------------------------------------------------------------------------------

def install_compat() -> None:
    """Names the test file imports that this torch's wheel lacks (identity stand-ins)."""
    from torch.testing._internal import common_utils

    if not hasattr(common_utils, "disable_translation_validation_if_dynamic_shapes"):
        # Upstream: turns off translation validation for one test under dynamic shapes (a Dynamo
        # debugging feature); torch 2.13 dropped it.  Nothing to turn off for ember.
        common_utils.disable_translation_validation_if_dynamic_shapes = lambda fn: fn


# ---------------------------------------------------------------------------------------------
# The shim: torch.compile & co. -> ember.compile
# ---------------------------------------------------------------------------------------------

class _AliasMeta(type):
    """A class that `issubclass`/`isinstance` (so `assertRaises`) treat as any of `_targets`."""

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls._targets)

    def __instancecheck__(cls, obj):
        return isinstance(obj, cls._targets)


class _UsersOwnExceptionAlias(_AliasMeta):
    """Dynamo wraps an exception the user's code raises while it traces in its own types
    (`UserError` for zip(strict=True)'s ValueError, `InternalTorchDynamoError` for frozenset.add's
    AttributeError, `TorchRuntimeError` for float() of a two-element tensor's ValueError); ember lets the user's own exception propagate unwrapped, as eager raises
    it.  So these also match a builtin exception type (never ember's CaptureError)."""

    def __subclasscheck__(cls, sub):
        return issubclass(sub, cls._targets) or (
            isinstance(sub, type) and issubclass(sub, Exception) and sub.__module__ == "builtins")

    def __instancecheck__(cls, obj):
        return cls.__subclasscheck__(type(obj))


class RecompileError(RuntimeError):
    """torch._dynamo.config.error_on_recompile was set and an ember-compiled call recompiled."""


@dataclasses.dataclass
class ShimStats:
    compile_calls: int = 0   # calls of a compile entry point (the test compiled something)


STATS = ShimStats()


def _backend(backend, default_backend: str):
    if backend is None or (isinstance(backend, str) and backend == "inductor"):
        return default_backend
    return backend


def _ember_compile(fn, *, backend, fullgraph, dynamic, mode=None, options=None, default_backend="ember"):
    import torch
    import ember

    STATS.compile_calls += 1
    settings = dict(options or {}) if mode is None else None
    if settings is not None:
        # torch.compile's options are Inductor's; keep only what ember.config knows.
        known = set(ember.config.Config().keys())
        settings = {k: v for k, v in settings.items() if k in known}
        if getattr(torch._dynamo.config, "capture_scalar_outputs", False):
            settings["capture_scalar_outputs"] = True
        settings = settings or None
    compiled = ember.compile(fn, backend=_backend(backend, default_backend), fullgraph=bool(fullgraph),
                             dynamic=dynamic, mode=mode, options=settings)
    if isinstance(compiled, types.FunctionType):
        return _with_recompile_check(compiled)
    if isinstance(compiled, types.MethodType) and isinstance(compiled.__func__, types.FunctionType):
        return types.MethodType(_with_recompile_check(compiled.__func__), compiled.__self__)
    return compiled


def _with_recompile_check(dispatcher):
    """torch._dynamo.config.error_on_recompile: raise when a call had to recompile."""
    import torch
    from ember.capture.runtime import counters

    @functools.wraps(dispatcher)
    def call(*args, **kwargs):
        if not getattr(torch._dynamo.config, "error_on_recompile", False):
            return dispatcher(*args, **kwargs)
        before = counters["stats"]["recompiles"]
        result = dispatcher(*args, **kwargs)
        if counters["stats"]["recompiles"] != before:
            raise RecompileError("ember recompiled while torch._dynamo.config.error_on_recompile was set")
        return result

    call._ember_original = getattr(dispatcher, "_ember_original", None)
    return call


@contextlib.contextmanager
def install_ember_shim(default_backend: str = "ember"):
    """Replace torch.compile, torch._dynamo.optimize/optimize_assert/reset/graph_break/disable
    (and the copies imported by name) with ember's, for the duration of the `with`."""
    import torch
    import torch._dynamo
    import torch._dynamo.eval_frame
    import torch._dynamo.exc
    import torch._dynamo.test_case
    import torch._dynamo.testing
    import ember
    from ember.capture.errors import CaptureError

    original_reset = torch._dynamo.reset

    def compile(model=None, *, fullgraph=False, dynamic=None, backend=None, mode=None, options=None,
                disable=False, **ignored):
        def wrap(fn):
            if disable:
                return fn
            return _ember_compile(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode,
                                  options=options, default_backend=default_backend)

        return wrap if model is None else wrap(model)

    def optimize(backend="inductor", *, nopython=False, dynamic=None, disable=False,
                 error_on_graph_break=None, **ignored):
        fullgraph = nopython or bool(error_on_graph_break)

        def wrap(fn):
            if disable:
                return fn
            return _ember_compile(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic,
                                  default_backend=default_backend)

        return wrap

    def optimize_assert(backend="inductor", *, dynamic=None, **ignored):
        return optimize(backend, nopython=True, dynamic=dynamic)

    def reset():
        ember.reset()
        original_reset()

    def disable(fn=None, recursive=True, *, reason=None, wrapping=True):
        if fn is None:
            return functools.partial(disable, recursive=recursive, reason=reason, wrapping=wrapping)
        return ember.disable(fn, reason=reason)

    unsupported = _AliasMeta("Unsupported", (Exception,),
                             {"_targets": (torch._dynamo.exc.Unsupported, CaptureError)})
    user_error = _UsersOwnExceptionAlias("UserError", (Exception,), {"_targets": (torch._dynamo.exc.UserError,)})
    internal_error = _UsersOwnExceptionAlias("InternalTorchDynamoError", (Exception,),
                                             {"_targets": (torch._dynamo.exc.InternalTorchDynamoError,)})
    runtime_error = _UsersOwnExceptionAlias("TorchRuntimeError", (Exception,),
                                            {"_targets": (torch._dynamo.exc.TorchRuntimeError,)})
    replacements = [
        (torch, "compile", compile),
        (torch._dynamo, "optimize", optimize),
        (torch._dynamo, "optimize_assert", optimize_assert),
        (torch._dynamo, "reset", reset),
        (torch._dynamo, "graph_break", ember.graph_break),
        (torch._dynamo, "disable", disable),
        (torch._dynamo.testing, "optimize_assert", optimize_assert),
        (torch._dynamo.testing, "reset", reset),
        (torch._dynamo.test_case, "reset", reset),
        (torch._dynamo.exc, "Unsupported", unsupported),
        (torch._dynamo.exc, "UserError", user_error),
        (torch._dynamo.exc, "InternalTorchDynamoError", internal_error),
        (torch._dynamo.exc, "TorchRuntimeError", runtime_error),
    ]
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in replacements if name in owner.__dict__]
    try:
        for owner, name, value in replacements:
            setattr(owner, name, value)
        yield
    finally:
        for owner, name, _ in replacements:
            with contextlib.suppress(AttributeError):
                delattr(owner, name)
        for owner, name, value in saved:
            setattr(owner, name, value)


@contextlib.contextmanager
def install_reference_shim(default_backend: str = "eager"):
    """torch.compile itself, only with its default backend replaced (Inductor compiles slowly)."""
    import torch
    import torch._dynamo

    real_compile, real_optimize = torch.compile, torch._dynamo.optimize

    def compile(model=None, **kwargs):
        STATS.compile_calls += 1
        kwargs["backend"] = _backend(kwargs.get("backend"), default_backend)
        return real_compile(model, **kwargs) if model is not None else real_compile(**kwargs)

    def optimize(*args, **kwargs):
        STATS.compile_calls += 1
        if args:
            args = (_backend(args[0], default_backend),) + args[1:]
        else:
            kwargs["backend"] = _backend(kwargs.get("backend"), default_backend)
        return real_optimize(*args, **kwargs)

    torch.compile, torch._dynamo.optimize = compile, optimize
    try:
        yield
    finally:
        torch.compile, torch._dynamo.optimize = real_compile, real_optimize


# ---------------------------------------------------------------------------------------------
# Running and classifying
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    name: str                      # Class.test_name
    category: str
    reason: str = ""               # first line of the reason
    where: str = ""                # file:line of the failing assertion or of the raise
    breaks: list = dataclasses.field(default_factory=list)   # ember graph breaks seen (reason first lines)
    graphs: int = 0                # graphs ember captured during the test
    seconds: float = 0.0


class TestTimeout(Exception):
    pass


def _first_line(text: str) -> str:
    text = str(text).strip().replace(str(TEST_FILE), TEST_FILE.name)
    return text.splitlines()[0] if text else ""


def _frames(tb):
    return [(frame.f_code.co_filename, lineno, frame) for frame, lineno in traceback.walk_tb(tb)]


def _line(filename: str, lineno: int) -> str:
    import linecache

    return linecache.getline(filename, lineno).strip()


def _in_ember(filename: str) -> bool:
    return f"{os.sep}ember{os.sep}" in filename and f"{os.sep}tests{os.sep}" not in filename


def _test_frames(frames):
    """Frames of the test file and of torch._dynamo.testing (standard_test)."""
    testing = os.path.join("torch", "_dynamo", "testing.py")
    return [f for f in frames if f[0] == str(TEST_FILE) or f[0].endswith(testing)]


def classify(err, expected_failure: bool = False) -> tuple[str, str, str]:
    """(category, reason, where) of one failed test, from sys.exc_info()."""
    from ember.capture.errors import CaptureError

    exc_type, exc, tb = err
    frames = _frames(tb)
    reason = f"{exc_type.__name__}: {_first_line(exc)}"
    tframes = _test_frames(frames)
    where = f"{Path(tframes[-1][0]).name}:{tframes[-1][1]}" if tframes else ""
    if expected_failure:
        return XFAIL, reason, where
    if isinstance(exc, TestTimeout):
        return ERROR, reason, where
    with_block = _enclosing_assert_raises(tframes)
    if with_block:  # an exception from inside an assertRaises block that expected another type
        return EXC_MISMATCH, f"{reason} (test expected {with_block})", where
    if isinstance(exc, RecompileError):
        return COUNT, f"{reason} (torch._dynamo.config.error_on_recompile)", where
    if isinstance(exc, CaptureError):
        return BREAK, _first_line(exc), where
    if isinstance(exc, AssertionError) and not any(_in_ember(f[0]) for f in frames):
        line = _line(tframes[-1][0], tframes[-1][1]) if tframes else ""
        numbers = [text.strip() for text in str(exc).splitlines() if text.strip().startswith("Expected ")]
        detail = f"{_first_line(exc)}{' ' + numbers[0] if numbers else ''}  [`{line}`]"
        if "assertExpectedInline" in line or "assertExpectedInline" in "".join(
                _line(f[0], f[1]) for f in frames):
            return GRAPH_TEXT, detail, where
        if "frame_count" in line or "op_count" in line:
            return COUNT, detail, where
        if "assertRaises" in line or "not raised" in str(exc):
            return EXC_MISMATCH, detail, where
        return WRONG, detail, where
    return ERROR, reason, where


def _enclosing_assert_raises(tframes) -> str:
    """The exception a `with self.assertRaises(X):` around the raising line expected, if any."""
    if not tframes:
        return ""
    filename, lineno, _ = tframes[-1]
    if filename != str(TEST_FILE):
        return ""
    indent = None
    for back in range(lineno, max(lineno - 6, 0), -1):
        text = _line(filename, back)
        import linecache

        raw = linecache.getline(filename, back)
        level = len(raw) - len(raw.lstrip())
        if indent is None:
            indent = level
            continue
        if level < indent and text.startswith("with self.assertRaises"):
            return text[len("with self."):].rstrip(":")
        if level < indent:
            return ""
    return ""


class _Result(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.outcome: Outcome | None = None
        self._sub: list[tuple[str, str, str]] = []

    def _set(self, test, category, reason="", where=""):
        self.outcome = Outcome(_name(test), category, reason, where)

    def addSuccess(self, test):
        if self._sub:
            worst = max(self._sub, key=lambda s: _SEVERITY[s[0]])
            self._set(test, *worst)
        else:
            self._set(test, PASSED)

    def addFailure(self, test, err):
        self._set(test, *classify(err))

    def addError(self, test, err):
        self._set(test, *classify(err))

    def addSkip(self, test, reason):
        self._set(test, SKIPPED, _first_line(reason))

    def addExpectedFailure(self, test, err):
        self._set(test, *classify(err, expected_failure=True))

    def addUnexpectedSuccess(self, test):
        self._set(test, XPASS, "upstream marks it @expectedFailure; it passed under this compiler")

    def addSubTest(self, test, subtest, err):
        if err is not None:
            category, reason, where = classify(err)
            self._sub.append((category, f"{subtest._subDescription()}: {reason}", where))


def _name(test) -> str:
    return f"{type(test).__name__}.{test._testMethodName}"


def load_tests(pattern: str | None = None) -> list[unittest.TestCase]:
    if not TEST_FILE.exists():
        raise FileNotFoundError(
            f"{TEST_FILE} is missing: see {TEST_FILE.parent / 'README.md'} for where it comes from")
    install_compat()
    module = sys.modules.get(TEST_MODULE)
    if module is None:
        spec = importlib.util.spec_from_file_location(TEST_MODULE, TEST_FILE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[TEST_MODULE] = module
        spec.loader.exec_module(module)
    loader = unittest.TestLoader()
    tests = []
    for value in vars(module).values():
        if isinstance(value, type) and issubclass(value, unittest.TestCase) and value.__module__ == TEST_MODULE:
            for name in loader.getTestCaseNames(value):
                if pattern is None or pattern in name or pattern in f"{value.__name__}.{name}":
                    tests.append(value(name))
    return tests


def run(pattern: str | None = None, reference: bool = False, default_backend: str | None = None,
        timeout_s: int = 60, quiet: bool = True) -> list[Outcome]:
    """Run the tests (all, or those whose name contains `pattern`) and classify each one."""
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")  # as tests/conftest.py (triton_utils imports triton)
    import ember
    from ember.capture.runtime import CaptureObserver

    if not reference:
        # As in ember's own suite (tests/conftest.py): an internal capture error fails the test
        # instead of quietly running the frame eagerly, a crashing lowering rule fails it too.
        ember.config.set(raise_capture_errors=True, raise_lowering_errors=True)
    tests = load_tests(pattern)
    shim = (install_reference_shim(default_backend or "eager") if reference
            else install_ember_shim(default_backend or "ember"))
    outcomes: list[Outcome] = []
    by_class: dict[type, list] = {}
    for test in tests:
        by_class.setdefault(type(test), []).append(test)

    def on_alarm(signum, frame):
        raise TestTimeout(f"test ran past {timeout_s}s")

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    sink = io.StringIO()
    try:
        with shim, warnings.catch_warnings():
            if quiet:
                warnings.simplefilter("ignore")
            for cls, members in by_class.items():
                cls.setUpClass()
                try:
                    for test in members:
                        result = _Result()
                        observer = CaptureObserver()
                        start = time.perf_counter()
                        calls_before = STATS.compile_calls
                        signal.alarm(timeout_s)
                        try:
                            with observer, contextlib.redirect_stdout(sink) if quiet else contextlib.nullcontext():
                                test.run(result)
                        finally:
                            signal.alarm(0)
                        if result.outcome is None and result._sub:  # subtests failed: no addSuccess
                            result.addSuccess(test)
                        outcome = result.outcome or Outcome(_name(test), ERROR, "no result recorded")
                        outcome.seconds = time.perf_counter() - start
                        if STATS.compile_calls == calls_before and outcome.category != SKIPPED:
                            # The test never compiled anything: it tests Dynamo's own classes.
                            outcome.reason = f"compiles nothing (was {outcome.category}" + (
                                f": {outcome.reason})" if outcome.reason else ")")
                            outcome.category = NA
                        outcome.graphs = len(observer.graphs)
                        outcome.breaks = [_first_line(b.reason) for b in observer.breaks]
                        outcomes.append(outcome)
                        if not quiet:
                            print(f"{outcome.category:>18}  {outcome.name}  {outcome.reason}", file=sys.stderr)
                finally:
                    cls.tearDownClass()
    finally:
        signal.signal(signal.SIGALRM, previous_handler)
    return outcomes


# ---------------------------------------------------------------------------------------------
# Reports
# ---------------------------------------------------------------------------------------------

def summary(outcomes: list[Outcome]) -> dict[str, int]:
    counts = {c: 0 for c in CATEGORIES}
    for o in outcomes:
        counts[o.category] += 1
    counts["total"] = len(outcomes)
    return counts


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def source_state() -> str:
    """The ember that ran: its commit, and the files of ember/ that differ from it (others' edits)."""
    import subprocess

    import ember

    root = Path(ember.__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                              timeout=30).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "ember"], cwd=root, capture_output=True,
                               text=True, timeout=30).stdout.split("\n")
    except (OSError, subprocess.SubprocessError):
        return f"ember at {root} (not a git checkout)"
    dirty = [line[3:] for line in dirty if line.strip()]
    if not head:
        return f"ember at {root} (not a git checkout)"
    return f"ember at {root}, commit {head}" + (
        f", with uncommitted changes in {len(dirty)} file(s): {', '.join(dirty)}" if dirty else ", clean")


def markdown(outcomes: list[Outcome], title: str, seconds: float) -> str:
    import torch

    counts = summary(outcomes)
    lines = [f"# {title}", "",
             f"Upstream file: {UPSTREAM[0]} `{UPSTREAM[1]}` at {UPSTREAM[2]}; torch {torch.__version__}; "
             f"{source_state()}; run took {seconds:.0f}s.", "",
             "| " + " | ".join(("total",) + CATEGORIES) + " |",
             "|" + "---|" * (len(CATEGORIES) + 1),
             "| " + " | ".join(str(counts[k]) for k in ("total",) + CATEGORIES) + " |", "",
             "Categories: wrong value = a failed assertion on values; count mismatch = frame_count/op_count "
             "differ from Dynamo's (or a recompile under error_on_recompile); graph text = "
             "assertExpectedInline on Dynamo's printed graph; exception mismatch = an assertRaises not "
             "satisfied; break = ember.CaptureError (graph break under fullgraph); error = any other "
             "exception; n/a = the test compiles nothing (Dynamo internals); xfail = upstream "
             "@expectedFailure that failed here too.", ""]
    for category in (WRONG, COUNT, GRAPH_TEXT, EXC_MISMATCH, BREAK, ERROR, XPASS, XFAIL, NA, SKIPPED):
        members = [o for o in outcomes if o.category == category]
        if not members:
            continue
        lines += [f"## {category} ({len(members)})", "",
                  "| test | reason | where | ember graphs / breaks | torch.compile 2.13 |", "|---|---|---|---|---|"]
        for o in members:
            breaks = f"{o.graphs} graphs" + (f"; breaks: {_md_escape('; '.join(o.breaks))}" if o.breaks else "")
            reference = REFERENCE_NON_PASS.get(o.name, "passes")
            lines.append(f"| {o.name} | {_md_escape(o.reason)} | {o.where} | {breaks} | {reference} |")
        lines.append("")
    lines += ["## all tests", "", "(breaks: graph breaks ember took where the test allows them)", "",
              "| test | outcome | graphs | breaks | seconds |", "|---|---|---|---|---|"]
    lines += [f"| {o.name} | {o.category} | {o.graphs} | {_md_escape('; '.join(o.breaks))} | {o.seconds:.2f} |"
              for o in outcomes]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the markdown report here")
    parser.add_argument("--json", help="write the outcomes as JSON here")
    parser.add_argument("-k", dest="pattern", help="only tests whose name contains this")
    parser.add_argument("--reference", action="store_true", help="run under torch.compile itself, not ember")
    parser.add_argument("--default-backend", default=None,
                        help="backend for torch.compile's default (inductor): ember's 'ember' (default), or "
                             "'eager'/'aot_eager'; with --reference torch's 'eager' unless given")
    parser.add_argument("--timeout", type=int, default=60, help="seconds per test")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each outcome and the tests' output")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    outcomes = run(args.pattern, args.reference, args.default_backend, args.timeout, quiet=not args.verbose)
    seconds = time.perf_counter() - start
    counts = summary(outcomes)
    who = "torch.compile (reference)" if args.reference else "ember"
    print(f"{UPSTREAM[1]} under {who}: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v or k == "total"))
    for o in outcomes:
        if o.category not in (PASSED, SKIPPED):
            print(f"  {o.category:>18}  {o.name}: {o.reason[:160]}")
    if args.out:
        Path(args.out).write_text(markdown(outcomes, f"{UPSTREAM[1]} under {who}", seconds))
        print(f"report: {args.out}")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": counts, "seconds": seconds,
                                               "tests": [dataclasses.asdict(o) for o in outcomes]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
