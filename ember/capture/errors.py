"""Signals raised during symbolic execution.

`Unsupported` means "ember cannot capture this instruction" (a graph break there);
`UserException` wraps an exception the user's own code raises (replayed for real, never
swallowed); `CaptureError` is what a user sees for `fullgraph=True` or bad input.
"""
from __future__ import annotations


class Unsupported(Exception):
    """Symbolic execution cannot go on here: graph break (or skip the frame)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class SkipFrame(Exception):
    """Nothing in this frame can be captured usefully: run it eagerly."""


class UserException(Exception):
    """User code raised `value` (a real exception object) during symbolic execution."""

    def __init__(self, value: BaseException) -> None:
        super().__init__(repr(value))
        self.value = value


class RestartCapture(Exception):
    """Translation learned where to break; start again from the top with that plan."""

    def __init__(self, offset: int, reason: str, lineno: int | None, filename: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason
        self.lineno = lineno
        self.filename = filename


class CaptureError(RuntimeError):
    """A capture that was asked not to break (fullgraph=True) or that hit bad input."""


class BackendCompilerFailed(RuntimeError):
    """A backend raised while compiling a captured graph."""
