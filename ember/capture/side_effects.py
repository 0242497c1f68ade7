"""The log of Python state changes seen during capture, replayed after the graph runs.

Capture never touches real Python objects.  Writes to attributes of existing objects,
mutations of existing lists/dicts/sets, global writes and closure-cell writes are recorded
here; reads see the recorded values; the glue code applies them, in order of first write,
once the graph has run, so the program leaves the same Python state as eager.
"""
from __future__ import annotations

from typing import Any

from .variables.base import VariableTracker


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
