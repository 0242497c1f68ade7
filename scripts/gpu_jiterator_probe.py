"""ember.compile of a function calling a jiterator kernel (it launches outside the dispatcher):
the call must break the graph and run eagerly, never reach the GPU with fake tensors."""
import torch

import ember

square_plus = torch.cuda.jiterator._create_jit_fn("template <typename T> T f(T x) { return x * x + x; }")


def fn(x):
    return square_plus(x.sin()) * 2


x = torch.randn(64, device="cuda")
out = ember.compile(fn, backend="ember")(x)
torch.cuda.synchronize()
print("jiterator under ember.compile:", (out - fn(x)).abs().max().item())
