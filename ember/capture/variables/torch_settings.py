"""torch's objects of global settings read by attribute (`torch.backends.cuda.matmul.allow_tf32`).

A read is answered at capture time with the current value, guarded to still read the same (a program
may switch TF32 between calls).  Writing a setting is not captured.
"""
from __future__ import annotations

from typing import Any

import torch

from ..errors import Unsupported, UserException
from ..guard_failures import Check
from .base import VariableTracker, constant


def _settings_classes() -> tuple[type, ...]:
    classes = []
    cuda = getattr(torch.backends, "cuda", None)
    matmul = getattr(cuda, "matmul", None)
    if matmul is not None and type(matmul).__name__ == "cuBLASModule":
        classes.append(type(matmul))
    return tuple(classes)


_SETTINGS_CLASSES = _settings_classes()


def is_settings_object(value: Any) -> bool:
    return type(value) in _SETTINGS_CLASSES


class TorchSettingsVariable(VariableTracker):
    """One of torch's settings objects; `value` is the real (process-wide) object."""

    def __init__(self, value: Any, source=None) -> None:
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def static_value(self) -> Any:
        return self.value

    def var_getattr(self, tx, name: str) -> VariableTracker:
        try:
            answer = getattr(self.value, name)
        except AttributeError as error:  # (the class decides which names exist: fixed)
            raise UserException(error) from None
        if not isinstance(answer, (bool, int, float, str, type(None))):
            raise Unsupported(f"{type(self.value).__name__}.{name} is not a plain setting")
        guards = tx.graph.guards
        read = f"getattr({guards.ref(self.value)}, {name!r})"
        label = f"{type(self.value).__name__}.{name}"
        if isinstance(answer, (bool, type(None))):
            guards.add(f"{read} is {answer!r}", f"{label} is {answer!r}", Check("value", read, answer, label))
        else:
            guards.add(f"{read} == {guards.ref(answer)}", f"{label} == {answer!r}", Check("value", read, answer, label))
        return constant(answer)

    def __repr__(self) -> str:
        return f"TorchSettingsVariable({type(self.value).__name__})"
