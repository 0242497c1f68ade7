"""Pointwise ops whose fake-tensor metadata disagrees with eager's kernel
(`ember/eager/metadata.py`): rewritten into ops whose metadata is right, the trace sees what
eager computes.
"""
from ..eager.metadata import REWRITES
from . import register

for _op, _rewrite in REWRITES.items():
    register(_op)(_rewrite)
