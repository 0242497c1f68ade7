"""The log of Python state changes seen during capture, replayed after the graph runs.

Capture never touches real Python objects.  Writes to attributes of existing objects,
mutations of existing lists/dicts/sets, global writes and closure-cell writes are recorded
here; reads see the recorded values; the glue code applies them, in order of first write,
once the graph has run, so the program leaves the same Python state as eager.  A capture
that restarts or fails therefore leaves nothing behind: it is simply dropped.

Real code runs at capture time in a few places only, each kept away from real objects:
tensor operators run on fake tensors and get no mutable Python object (graph.py `_unwrap`);
torch's Python functions run as graph nodes only from its tensor-only files, everything else
(optimizers, schedulers, hooks) is inlined (torch_functions.py); builtins and math/operator
functions run for real on constants only, never the mutating ones (builtins.py, objects.py);
global setters of torch break.  `RealObjectWatch` checks the rule on everything a capture reads.
"""
from __future__ import annotations

from typing import Any

import torch

from .variables.base import VariableTracker


class RealObjectWatch:
    """The rule checked: after a capture attempt (finished, restarted or failed), every real
    container, object and tensor it read is as it was.

    Each is snapshotted shallowly when first read: the identities of a container's items or an
    object's attributes, a tensor's version counter.  A difference is an ember bug (some path
    ran real code on a real object); it is reported naming the object, never left silently."""

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

    def __bool__(self) -> bool:
        return bool(self.attr_writes or self.global_writes or self.cell_writes or self.mutated_containers
                    or self.calls)

    def record_call(self, owner: VariableTracker, name: str, args: list, kwargs: dict) -> None:
        self.calls.append((owner, name, list(args), dict(kwargs)))

    # -- attributes ----------------------------------------------------------------------------
    @staticmethod
    def owner_key(owner: VariableTracker) -> int:
        """Writes to one real object go together, whichever variable stands for it."""
        real = getattr(owner, "real_object", None)
        if real is None:
            getter = getattr(owner, "static_value", None)
            real = getter() if getter is not None else None
        return id(real) if real is not None else id(owner)

    def store_attr(self, owner: VariableTracker, name: str, value: VariableTracker) -> None:
        key = (self.owner_key(owner), name)
        self.deleted_attrs.discard(key)
        self.attr_writes[key] = (owner, name, value)

    def delete_attr(self, owner: VariableTracker, name: str) -> None:
        key = (self.owner_key(owner), name)
        self.attr_writes.pop(key, None)
        self.deleted_attrs.add(key)

    def pending_attr(self, owner: VariableTracker, name: str) -> VariableTracker | None:
        entry = self.attr_writes.get((self.owner_key(owner), name))
        return entry[2] if entry else None

    def is_deleted(self, owner: VariableTracker, name: str) -> bool:
        return (self.owner_key(owner), name) in self.deleted_attrs

    def attrs_of(self, owner: VariableTracker) -> dict[str, VariableTracker]:
        return {name: value for (key, name), (o, _, value) in self.attr_writes.items() if o is owner}

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

    def describe(self) -> list[str]:
        lines = []
        for owner, name, _ in self.attr_writes.values():
            lines.append(f"setattr {owner}.{name}")
        for name in self.global_writes:
            lines.append(f"global {name}")
        for container in self.mutated_containers.values():
            lines.append(f"mutate {container}")
        return lines


def replay_order(effects: SideEffects) -> list[Any]:
    return list(effects.mutated_containers.values())
