"""Seed 004's two-layer model through ember's AOT autograd: prints the forward and backward
graphs and writes their SVG drawings (forward_aot.svg, backward_aot.svg).

    python examples/aot_seed004.py
"""
import torch
from torch import nn

import ember
from ember.autograd.api import AotCompiled
from ember.autograd.draw import write_svg
from ember.autograd.partition import partition_min_cut
from ember.decomp import core_decompositions


class MyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 5)
        self.fc2 = nn.Linear(5, 2)
        self.relu = nn.ReLU()
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        return self.softmax(self.fc2(self.relu(self.fc1(x))))


def show(kind):
    def compiler(gm, example_inputs):
        print(f"===== {kind} graph =====")
        print(gm.print_readable(print_output=False))
        try:
            print("wrote", write_svg(gm, f"{kind}_aot.svg", kind))
        except RuntimeError as error:
            print(f"(no drawing: {error})")
        return gm.forward

    return compiler


def aot_backend(gm, example_inputs):
    return AotCompiled(gm, show("forward"), show("backward"), partition_min_cut, core_decompositions())


def main() -> None:
    model = MyModel()
    compiled = ember.compile(model, backend=aot_backend)
    loss = nn.functional.mse_loss(compiled(torch.randn(1, 10)), torch.randn(1, 2))
    loss.backward()


if __name__ == "__main__":
    main()
