"""Attention masks with a broadcast last dimension are passed to scaled_dot_product_attention
contiguous (ember/autograd/attention.py): the fused kernels accept them; results as eager's."""
import torch
import torch.nn.functional as F

import ember


def test_broadcast_mask_is_made_contiguous_and_results_match():
    def attend(q, mask):
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask.expand(2, 1, 8, 8))

    graphs = []

    def spy(gm, example_inputs):
        from ember.autograd.api import aot_backend

        graphs.append(gm)
        return aot_backend(lambda g, _: g.forward)(gm, example_inputs)

    q = torch.randn(2, 3, 8, 4, requires_grad=True)
    mask = torch.rand(2, 1, 8, 1) > 0.3
    out = ember.compile(attend, backend=spy)(q, mask)
    expected = attend(q, mask)
    torch.testing.assert_close(out, expected)
    assert any(node.target == "contiguous" for node in graphs[0].graph.nodes)
