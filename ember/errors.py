"""Exceptions that cross stages: raised by one stage, caught by another.  Each stage's own
signals stay with it (capture/errors.py); what is here is the contract between them."""
from __future__ import annotations


class CannotCapture(Exception):
    """Compiled autograd cannot capture this backward; autograd's engine runs it (the message
    says why).  Raised also by the AOT runtime's traceable backward (an ember region's)."""


class GraphNotSupported(Exception):
    """Some node of this graph cannot be compiled or called as one ATen op on ember's buffers
    (the reason names it): the graph runs as its ATen calls.  Raised by lowering and by the
    kernel backends, caught where a graph is compiled (codegen/compile.py)."""


class InputShapeMismatch(RuntimeError):
    """A compiled graph with symbolic sizes got inputs whose sizes or strides break the relations
    it was compiled for (two sizes that were one symbol differ, a stride that is not the traced
    one); guards upstream should have sent these inputs elsewhere.  Raised by the generated
    wrapper before any kernel runs (nothing was done); the AOT runtime then compiles per shape."""
