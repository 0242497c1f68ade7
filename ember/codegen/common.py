"""What the kernel generators (C++, Triton) share: naming a kernel's buffer arguments."""
from __future__ import annotations


class KernelArguments:
    """A kernel reads its inputs through `in_ptrK` and writes (and may re-read) its outputs
    through `out_ptrK`, numbered in order of first use; subclasses set `inputs` and `outputs`."""

    inputs: list[str]
    outputs: list[str]

    def input_pointer(self, name: str) -> str:
        if name in self.outputs:
            return f"out_ptr{self.outputs.index(name)}"
        if name not in self.inputs:
            self.inputs.append(name)
        return f"in_ptr{self.inputs.index(name)}"
