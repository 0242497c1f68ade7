"""Which attention kernel BERT's scaled_dot_product_attention picks, in eager and while ember
traces it (debugging aid: ember's BERT backward showed the math path's bmm and softmax)."""
import torch
import torch.nn.functional as F
import transformers

import ember

original = F.scaled_dot_product_attention
seen = []


def spy(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
    if len(seen) < 4:
        def desc(t):
            return None if t is None else (type(t).__name__, tuple(t.shape), t.stride(), t.dtype, t.requires_grad)
        try:
            choice = torch._fused_sdp_choice(q, k, v, attn_mask, dropout_p, is_causal, scale=scale)
        except Exception as error:  # noqa: BLE001
            choice = f"raised {error}"
        print("sdpa", desc(q), desc(attn_mask), "autocast", torch.is_autocast_enabled("cuda"), "choice", choice,
              kwargs, flush=True)
        seen.append(1)
    return original(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale, **kwargs)


F.scaled_dot_product_attention = spy
torch.nn.functional.scaled_dot_product_attention = spy
torch.manual_seed(0)
model = transformers.BertForMaskedLM(transformers.BertConfig(num_hidden_layers=1)).cuda()
ids = torch.randint(0, 30522, (16, 512), device="cuda")
for label, fn in (("eager", model), ("ember", ember.compile(model, backend="ember"))):
    print("===", label, flush=True)
    seen.clear()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = fn(input_ids=ids, labels=ids)
    out.loss.backward()
