"""Narrows fuzz inplace 700229 on the GPU: x - x after a product reduction read back wrong."""
import torch

import ember

torch.manual_seed(0)
a = (torch.randn((17, 4), generator=torch.Generator().manual_seed(70022901)) * 3.0).to("cuda")[1:]


def variants():
    def full(a):
        v0 = a.prod(); v1 = v0 * v0; v1 = v1 - v1
        return torch.atan2(v1, v0), a.t() + v1

    def no_transpose(a):
        v0 = a.prod(); v1 = v0 * v0; v1 = v1 - v1
        return a + v1, v0

    def with_sum(a):
        v0 = a.sum() * 1e11; v1 = v0 * v0; v1 = v1 - v1
        return a.t() + v1, v0

    def prod_only(a):
        v0 = a.prod()
        return v0 - v0 + a.t(), v0

    def sub_not_self(a):
        v0 = a.prod(); v1 = v0 * v0; v2 = v0 * v0
        return a.t() + (v1 - v2), v0
    return [full, no_transpose, with_sum, prod_only, sub_not_self]


for fn in variants():
    ember.reset()
    expected = fn(a)
    for autotune in (True, False):
        with ember.config.patch(autotune=autotune):
            ember.reset()
            got = ember.compile(fn, backend="ember")(a)
        ok = all(torch.allclose(g, e, rtol=1e-3, atol=1e-3) for g, e in zip(got, expected))
        print(f"{fn.__name__:14} autotune={autotune}: {'ok' if ok else 'WRONG'}",
              [g.flatten()[0].item() for g in got], [e.flatten()[0].item() for e in expected])
