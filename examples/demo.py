"""ember's small demo: the PyTorch 2 talk's toy example, captured and run.

    python examples/demo.py
"""
import torch

import ember

graphs = []


def show_graph(gm: torch.fx.GraphModule, example_inputs):
    graphs.append(gm)
    print(f"--- captured graph {len(graphs)} ---")
    print(gm.code.strip())
    return gm.forward


@ember.compile(backend=show_graph)
def toy_example(a, b):
    x = a / (torch.abs(a) + 1)
    if b.sum() < 0:
        b = b * -1
    return x * b


def main() -> None:
    torch.manual_seed(0)
    for _ in range(100):
        a, b = torch.randn(10), torch.randn(10)
        expected = a / (torch.abs(a) + 1) * (b * -1 if b.sum() < 0 else b)
        torch.testing.assert_close(toy_example(a, b), expected)
    print(f"100 calls matched eager; {len(graphs)} graphs captured (the talk shows 3)")
    print(ember.explain(toy_example)(torch.randn(10), -torch.ones(10)))


if __name__ == "__main__":
    main()
