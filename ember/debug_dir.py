"""The debug report: every stage's dump per captured frame, in files, with an index.html.

    EMBER_DEBUG_DIR=/tmp/ember-debug python train.py     # or ember.config.debug_dir = "/tmp/ember-debug"

Each process writes one run folder, `<dir>/run_<date>-<time>_pid<pid>/`, holding one numbered
subfolder per captured frame (`001_forward/`) with one file per record of ember's log channels
(logs.py), in order, and `index.html`, which links them and shows the one-line records (breaks,
recompiles, fallbacks, timings) inline.  A frame's scope is its capture, its graphs' compiles and
its first run (capture/runtime.py calls `frame`); what is compiled outside any capture (a
backward at its first call, compiled autograd) goes to a folder named after the frame captured
last (`003_after_f/`).  The folder setting is read when a capture starts.  While a report is
written every channel left at its default level is on; a level a program set on a channel
itself is never changed.
"""
from __future__ import annotations

import atexit
import contextlib
import html
import logging
import os
import re
import time
import types
from typing import Iterator

from . import config as ember_config

# Channels whose records are one line: shown in the index itself (and written to a file too).
_INLINE = ("graph_breaks", "recompiles", "fallbacks", "perf")
# How the index names a dump whose first line does not say what it is.
_TITLES = {"ir": "loop IR", "schedule": "schedule (fused kernels and extern calls)",
           "output_code": "kernels and wrapper"}


def configured_root() -> str:
    """ember.config.debug_dir, else $EMBER_DEBUG_DIR, else "" (no report)."""
    return ember_config._config.debug_dir or os.environ.get("EMBER_DEBUG_DIR", "")


class _Frame:
    def __init__(self, report: "_Report", index: int, name: str, where: str) -> None:
        self.report = report
        self.folder_name = f"{index:03d}_{re.sub(r'[^0-9A-Za-z_.-]', '_', name)[:60]}"
        self.name = name
        self.where = where
        self.records: list[tuple[str, str, str]] = []  # (channel, file, message)
        self.seconds: float | None = None
        self.captured = where != _OUTSIDE  # (else: records between captures)

    def add(self, channel: str, message: str) -> None:
        folder = os.path.join(self.report.folder, self.folder_name)
        os.makedirs(folder, exist_ok=True)
        filename = f"{len(self.records) + 1:02d}_{channel}.txt"
        with open(os.path.join(folder, filename), "w") as file:
            file.write(message if message.endswith("\n") else message + "\n")
        self.records.append((channel, f"{self.folder_name}/{filename}", message))


class _Report:
    def __init__(self, root: str) -> None:
        self.root = root
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.folder = os.path.join(os.path.abspath(root), f"run_{stamp}_pid{os.getpid()}")
        os.makedirs(self.folder, exist_ok=True)
        self.frames: list[_Frame] = []
        self.started = time.strftime("%Y-%m-%d %H:%M:%S")

    def new_frame(self, name: str, where: str) -> _Frame:
        frame = _Frame(self, len(self.frames) + 1, name, where)
        self.frames.append(frame)
        return frame

    def write_index(self) -> None:
        breaks = sum(channel == "graph_breaks" for frame in self.frames for channel, *_ in frame.records)
        recompiles = sum(channel == "recompiles" and message.startswith("recompiling")
                         for frame in self.frames for channel, _, message in frame.records)
        parts = ["<!doctype html><meta charset='utf-8'><title>ember debug report</title>",
                 "<style>body{font-family:sans-serif} li{margin:2px 0} code,pre{font-size:90%}"
                 " .c{color:#666}</style>",
                 f"<h1>ember debug report</h1><p>process {os.getpid()}, started {self.started}: "
                 f"{sum(frame.captured for frame in self.frames)} captured frames, {breaks} graph breaks, {recompiles} recompiles</p>"]
        for frame in self.frames:
            took = "" if frame.seconds is None else f": capture, compile and first run took {frame.seconds:.3f} s"
            parts.append(f"<h2 id='{frame.folder_name}'>{html.escape(frame.folder_name)}: "
                         f"<code>{html.escape(frame.name)}</code></h2><p class='c'>{html.escape(frame.where)}"
                         f"{took}</p><ul>")
            for channel, path, message in frame.records:
                label = f"<span class='c'>[{channel}]</span> "
                first = message.splitlines()[0] if message else ""
                if channel in _INLINE and "\n" not in message.strip():
                    parts.append(f"<li>{label}{html.escape(first)} <a href='{path}'>file</a></li>")
                else:
                    title = _TITLES.get(channel) or first[:200] or channel
                    parts.append(f"<li>{label}<a href='{path}'>{html.escape(title)}</a></li>")
            parts.append("</ul>")
        with open(os.path.join(self.folder, "index.html"), "w") as file:
            file.write("\n".join(parts) + "\n")


class _Sink(logging.Handler):
    """Every channel's records, to the frame being captured (or the one captured last)."""

    def emit(self, record: logging.LogRecord) -> None:
        report = _state.report
        if report is None:
            return
        try:
            channel = record.name.split(".", 1)[-1]
            message = record.getMessage()
            if _state.stack:
                _state.stack[-1].add(channel, message)
                return
            frame = _state.outside
            if frame is None:  # (records between two captures share one folder)
                after = f"after_{_state.last_name}" if _state.last_name else "before_any_capture"
                frame = _state.outside = report.new_frame(after, _OUTSIDE)
            frame.add(channel, message)
            report.write_index()
        except Exception:  # a full disk must not break the program being compiled
            self.handleError(record)


_OUTSIDE = ("compiled outside any capture (a backward at its first call, compiled autograd), after the "
            "frame named here and its callees")


class _State:
    saved_level: int | None = None  # the parent logger's level before the report switched it on

    def reset(self, report: _Report | None) -> None:
        self.report = report
        self.stack: list[_Frame] = []
        self.outside: _Frame | None = None  # where records outside any capture go now
        self.last_name = ""  # the frame captured last


_state = _State()
_state.reset(None)
_sink = _Sink(level=logging.DEBUG)


# The sink and the DEBUG level go on the channels' parent logger ("ember"), never on a channel:
# a channel at NOTSET inherits them, and what a program set on a channel itself stays as it is.
def _parent() -> logging.Logger:
    return logging.getLogger("ember")


def _install(root: str) -> None:
    _state.reset(_Report(root))
    parent = _parent()
    _state.saved_level = parent.level
    parent.setLevel(logging.DEBUG)
    if _sink not in parent.handlers:
        parent.addHandler(_sink)


def _uninstall() -> None:
    if _state.report is not None:
        _state.report.write_index()
    parent = _parent()
    parent.removeHandler(_sink)
    if _state.saved_level is not None and parent.level == logging.DEBUG:  # (unless changed since)
        parent.setLevel(_state.saved_level)
    _state.saved_level = None
    _state.reset(None)


def _sync() -> _Report | None:
    root = configured_root()
    if _state.report is not None and (not root or root != _state.report.root) and not _state.stack:
        _uninstall()
    if root and _state.report is None:
        _install(root)
    return _state.report


@contextlib.contextmanager
def frame(code: types.CodeType | None = None, name: str | None = None) -> Iterator[None]:
    """The scope of one frame's capture (and its graphs' compiles and first run)."""
    report = _sync()
    if report is None:
        yield
        return
    where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else ""
    current = report.new_frame(name or (code.co_name if code is not None else "graph"), where)
    _state.stack.append(current)
    _state.outside = None
    started = time.perf_counter()
    try:
        yield
    finally:
        current.seconds = time.perf_counter() - started
        if _state.stack and _state.stack[-1] is current:
            _state.stack.pop()
        if not _state.stack:
            _state.last_name = current.name
        if _state.report is report:
            report.write_index()


def run_folder() -> str | None:
    """This process's run folder, once a capture has written a report (else None)."""
    return _state.report.folder if _state.report is not None else None


@atexit.register
def _write_index_at_exit() -> None:
    if _state.report is not None:
        with contextlib.suppress(Exception):
            _state.report.write_index()
