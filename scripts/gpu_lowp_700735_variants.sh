# fuzz lowp 700735 on the GPU: the fused layer_norm + var_mean under launch variants
cat > /tmp/v.py <<'PY'
import sys, torch
sys.path.insert(0, "scripts")
import importlib.util
spec = importlib.util.spec_from_file_location("p", "scripts/gpu_lowp_700735.py")
PY
python3 - <<'PY'
import torch, torch.nn.functional as F, ember, os
from ember import config
def gen(s): return torch.Generator().manual_seed(s)
def mk():
    c = (torch.randn((7, 7, 5, 4), generator=gen(70073503)) * 10.0).to(torch.bfloat16).cuda()
    d = (torch.randn((4, 5), generator=gen(70073504)) * 300.0).to(torch.bfloat16).cuda()
    d.view(-1)[[5, 6, 15]] = torch.tensor([0.5, -1.0, -1.0], dtype=torch.bfloat16).cuda()
    e = (torch.rand((5, 4), generator=gen(70073505)) + 0.1).to(torch.bfloat16).cuda()
    return c, d.t(), e
def only_var(c, d, e):
    v2 = F.layer_norm(c.sign().log_softmax(0), (5, 4), d, e, eps=1e-3)
    return torch.var_mean(v2, (0, 1, 2))
def ln_sum(c, d, e):
    v2 = F.layer_norm(c.sign().log_softmax(0), (5, 4), d, e, eps=1e-3)
    return v2.float().sum((0, 1, 2)), v2.float().amax((0, 1, 2))
def ln_only(c, d, e):
    return F.layer_norm(c.sign().log_softmax(0), (5, 4), d, e, eps=1e-3).float().sum((0,1,2))
def ln_contig(c, d, e):
    return F.layer_norm(c.sign().log_softmax(0), (5, 4), d.contiguous(), e, eps=1e-3).float().sum((0,1,2))
def f32(c, d, e):
    return F.layer_norm(c.float().sign().log_softmax(0), (5, 4), d.float(), e.float(), eps=1e-3).sum((0,1,2))
tag = os.environ.get("TAG", "default")
for fn in (only_var, ln_sum, ln_only, ln_contig, f32):
    torch._dynamo.reset() if False else None
    x = fn(*mk()); y = ember.compile(fn, backend="ember")(*mk())
    print(tag, fn.__name__, "eager", [t.tolist() for t in x] if isinstance(x, tuple) else x.tolist(),
          "ember", [t.tolist() for t in y] if isinstance(y, tuple) else y.tolist(), flush=True)
PY
