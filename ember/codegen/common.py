"""What the kernel generators (C++, Triton) share: naming a kernel's buffer arguments and its
bounds-check sites."""
from __future__ import annotations


class KernelArguments:
    """A kernel reads its inputs through `in_ptrK` and writes (and may re-read) its outputs
    through `out_ptrK`, numbered in order of first use; subclasses set `inputs` and `outputs`."""

    inputs: list[str]
    outputs: list[str]
    index_checks: list[str]  # sites of bounds-checked indexing, in order of first use

    def index_check_site(self, site: str) -> int:
        """The position of `site` among the kernel's bounds checks (its flag: a bit in C++, an
        element of the flag buffer in Triton)."""
        if site not in self.index_checks:
            self.index_checks.append(site)
        return self.index_checks.index(site)

    def input_pointer(self, name: str) -> str:
        if name in self.outputs:
            return f"out_ptr{self.outputs.index(name)}"
        if name not in self.inputs:
            self.inputs.append(name)
        return f"in_ptr{self.inputs.index(name)}"
