"""Logging channels switched on by EMBER_LOGS, in the spirit of TORCH_LOGS.

    EMBER_LOGS=graph_breaks,guards,recompiles,graph_code,bytecode python train.py

Each channel is a standard `logging` logger named `ember.<channel>`; a channel listed in
EMBER_LOGS gets level DEBUG and a stderr handler.  `EMBER_LOGS=all` turns on every channel.
`ember.logs.enable("guards")` does the same from code (tests use it with caplog).
EMBER_DEBUG_DIR (debug_dir.py) also writes every channel's records to files, per captured frame.
"""
from __future__ import annotations

import logging
import os
import sys

CHANNELS = (
    "graph_breaks",  # each graph break with its reason and user file:line
    "guards",  # the guard function of each new cache entry
    "recompiles",  # why a cached entry did not match
    "graph_code",  # each captured FX graph as readable Python
    "bytecode",  # original, resume and glue code of each capture
    "fallbacks",  # what ran eagerly instead of compiled, and why
    "perf",  # capture timings
    "ir",  # each graph's loop-level IR (buffers and their loop bodies)
    "schedule",  # fused kernels and extern calls, in order
    "output_code",  # generated kernels and wrappers
    "compiled_autograd",  # each captured backward's reason ("new autograd node", "changed shapes"), its graph, fallbacks
    "autotune",  # each tuned Triton kernel's launch configurations, their times and the choice
    # the backend's steps (pipeline.py), each printing what it made; "schedule" above is one
    "attention_masks", "channels_last", "trace_joint", "cse", "partition",  # FX graphs
    "cpu_scalars", "supported", "bias_epilogue", "lower", "kernels", "build", "load", "wrapper", "cudagraphs",
)

_handler = logging.StreamHandler(sys.stderr)
_handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))  # [ember.<channel>]


def get(channel: str) -> logging.Logger:
    if channel not in CHANNELS:
        raise ValueError(f"unknown ember log channel {channel!r}; channels: {', '.join(CHANNELS)}")
    return logging.getLogger(f"ember.{channel}")


def enabled(channel: str) -> bool:
    return get(channel).isEnabledFor(logging.DEBUG)


def enable(*channels: str) -> None:
    for channel in channels:
        logger = get(channel)
        logger.setLevel(logging.DEBUG)
        if _handler not in logger.handlers:
            logger.addHandler(_handler)


def _from_environment() -> None:
    spec = os.environ.get("EMBER_LOGS", "")
    names = [name.strip() for name in spec.split(",") if name.strip()]
    if "all" in names:
        names = list(CHANNELS)
    unknown = [name for name in names if name not in CHANNELS]
    if unknown:
        print(
            f"ember: EMBER_LOGS names unknown channel(s) {unknown}; known: {', '.join(CHANNELS)}",
            file=sys.stderr,
        )
    enable(*[name for name in names if name in CHANNELS])


_from_environment()
