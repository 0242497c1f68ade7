"""Small probes of ember's Triton path on the GPU machine (debugging aid; prints what differs)."""
import torch

import ember

torch.manual_seed(0)


def probe(name, fn, *args):
    ember.reset()
    try:
        got = ember.compile(fn, backend="ember")(*args)
        expected = fn(*args)
        torch.cuda.synchronize()
        ok = all(torch.equal(g, e) if not g.is_floating_point() else torch.allclose(g, e, atol=1e-5, rtol=1e-5)
                 for g, e in zip(got if isinstance(got, tuple) else (got,),
                                 expected if isinstance(expected, tuple) else (expected,)))
        print(name, "ok" if ok else f"DIFFERS\n  got {got}\n  expected {expected}", flush=True)
    except Exception as error:  # noqa: BLE001
        print(name, "raised", type(error).__name__, str(error)[:200], flush=True)


x64 = torch.randint(-5, 5, (4, 6), device="cuda")
probe("cpu scalar times cuda", lambda x, s: x * s + 1, x64.float(), torch.tensor(2.5))
probe("int64 add", lambda x: x + 2, x64)
probe("int64 view add", lambda x: x[1:].flatten() * 7, x64)
probe("int64 clone", lambda x: x.clone().view(-1), x64)
probe("int32 add", lambda x: x + 2, x64.int())
probe("float add", lambda x: x + 2, x64.float())
c = torch.randint(-8, 9, (6, 7, 3), device="cuda")[1:]
probe("3811 core", lambda c: torch.add(c.expand(2, 5, 7, -1).select(1, -4), True, alpha=2), c)
probe("3811 flatten", lambda c: torch.add(c.expand(2, 5, 7, -1).select(1, -4), True, alpha=2).flatten(1, 2), c)
import torch.nn.functional as F  # noqa: E402

logits = torch.randn(2, 16, 50, device="cuda")
labels = torch.randint(0, 50, (2, 16), device="cuda")
probe("log_softmax and view", lambda l, t: (l.view(-1, 50).log_softmax(-1), t.view(-1) + 0), logits, labels)
probe("nll_loss of an input", lambda l, t: F.nll_loss(l.view(-1, 50), t.view(-1)), logits.log_softmax(-1), labels)
probe("cross_entropy", lambda l, t: F.cross_entropy(l.view(-1, 50), t.view(-1)), logits, labels)
import transformers  # noqa: E402

cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                              vocab_size=500)
bert = transformers.BertForMaskedLM(cfg).cuda().eval()
ids = torch.randint(0, 500, (2, 16), device="cuda")
probe("small bert loss", lambda i: bert(input_ids=i, labels=i).loss, ids)
probe("small bert logits", lambda i: bert(input_ids=i).logits, ids)
