"""The log of Python state changes seen during capture, replayed after the graph runs.

Capture never touches real Python objects.  Attribute writes, mutations of existing containers,
global and closure-cell writes are recorded here; reads see the recorded values; the glue applies
them once the graph has run, in order of first write.  A capture that restarts or fails leaves
nothing behind.  Real code runs at capture time only away from real objects: operators on fake
tensors get no mutable Python object (graph.py `_unwrap`), torch's Python functions run as nodes
only from its tensor-only files (torch_functions.py), builtins and math run on constants only;
`RealObjectWatch` checks the rule on everything a capture reads.
"""
from __future__ import annotations

from typing import Any

import torch

from .variables.base import VariableTracker, static_of


class RealObjectWatch:
    """After a capture attempt, every real container, object and tensor it read must be as it was:
    each is snapshotted shallowly when first read (its items' or attributes' identities, a tensor's
    version counter); a difference is an ember bug, reported naming the object."""

    def __init__(self) -> None:
        self._snapshots: dict[int, tuple[Any, str, Any]] = {}

    def watch(self, value: Any, label: str) -> None:
        if id(value) not in self._snapshots:
            self._snapshots[id(value)] = (value, label, _shallow_state(value))

    def changed(self) -> list[str]:
        return [label for value, label, state in self._snapshots.values() if _shallow_state(value) != state]


def _shallow_state(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value._version
    if isinstance(value, dict):
        return tuple((id(key), id(item)) for key, item in value.items())
    if isinstance(value, list):
        return tuple(map(id, value))
    if isinstance(value, (set, frozenset)):
        return frozenset(map(id, value))
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict):
        return tuple((name, id(item)) for name, item in attributes.items())
    return None


class SideEffects:
    def __init__(self) -> None:
        # (id(obj), attr) -> value; the owner variable is kept for reconstruction.
        self.attr_writes: dict[tuple[int, str], tuple[VariableTracker, str, VariableTracker]] = {}
        # (id(globals dict), name) -> value; global_dicts maps the id back to the dict.
        self.global_writes: dict[tuple[int, str], VariableTracker] = {}
        self.global_dicts: dict[int, dict] = {}
        self.cell_writes: dict[int, tuple[VariableTracker, VariableTracker]] = {}
        self.mutated_containers: dict[int, VariableTracker] = {}
        self.deleted_attrs: set[tuple[int, str]] = set()
        # Calls replayed in order after the graph (logging): (owner, method name, args, kwargs).
        self.calls: list[tuple[VariableTracker, str, list, dict]] = []
        self.real_objects = RealObjectWatch()

    def record_call(self, owner: VariableTracker, name: str, args: list, kwargs: dict) -> None:
        self.calls.append((owner, name, list(args), dict(kwargs)))

    # -- attributes ----------------------------------------------------------------------------
    @staticmethod
    def owner_key(owner: VariableTracker) -> int:
        """Writes to one real object go together, whichever variable stands for it."""
        real = getattr(owner, "real_object", None)
        real = static_of(owner) if real is None else real
        return id(real) if real is not None else id(owner)

    def store_attr(self, owner: VariableTracker, name: str, value: VariableTracker) -> None:
        key = (self.owner_key(owner), name)
        self.deleted_attrs.discard(key)
        self.attr_writes[key] = (owner, name, value)

    def pending_attr(self, owner: VariableTracker, name: str) -> VariableTracker | None:
        entry = self.attr_writes.get((self.owner_key(owner), name))
        return entry[2] if entry else None

    def is_deleted(self, owner: VariableTracker, name: str) -> bool:
        return (self.owner_key(owner), name) in self.deleted_attrs

    # -- globals and cells ---------------------------------------------------------------------
    def store_global(self, key: tuple[int, str], value: VariableTracker) -> None:
        self.global_writes[key] = value

    def pending_global(self, key: tuple[int, str]) -> VariableTracker | None:
        return self.global_writes.get(key)

    def store_cell(self, cell: VariableTracker, value: VariableTracker) -> None:
        self.cell_writes[id(cell)] = (cell, value)

    def pending_cell(self, cell: VariableTracker) -> VariableTracker | None:
        entry = self.cell_writes.get(id(cell))
        return entry[1] if entry else None

    # -- containers ----------------------------------------------------------------------------
    def mutate_container(self, container: VariableTracker) -> None:
        if container.source is not None or getattr(container, "real_object", None) is not None:
            self.mutated_containers[id(container)] = container
