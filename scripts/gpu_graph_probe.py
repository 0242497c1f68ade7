"""Prints the nodes of BERT's compiled training graphs (GPU) that make large copies: what they
copy, in which layout (debugging aid for gpu_profile.py's kernel tables)."""
import torch
import transformers

import ember
from ember.codegen import compile as codegen_compile

graphs = []
original = codegen_compile.compile_graph


def recording(gm, example_inputs):
    graphs.append(gm)
    return original(gm, example_inputs)


codegen_compile.compile_graph = recording
torch.manual_seed(0)
model = transformers.BertForMaskedLM(transformers.BertConfig(num_hidden_layers=2)).cuda()
for module in model.modules():
    if isinstance(module, torch.nn.Dropout):
        module.p = 0.0
ids = torch.randint(0, 30522, (16, 512), device="cuda")
compiled = ember.compile(model, backend="ember")
with torch.autocast("cuda", dtype=torch.bfloat16):
    out = compiled(input_ids=ids, labels=ids)
out.loss.backward()
for k, gm in enumerate(graphs):
    print(f"=== graph {k}")
    for node in gm.graph.nodes:
        val = node.meta.get("val")
        if node.op == "call_function" and isinstance(val, torch.Tensor) and val.numel() >= 16 * 512 * 512 and \
                ("copy" in str(node.target) or "clone" in str(node.target) or "expand" in str(node.target)
                 or "attention" in str(node.target)):
            args = [f"{a.name}{tuple(a.meta['val'].shape) if isinstance(a.meta.get('val'), torch.Tensor) else ''}"
                    f"{a.meta['val'].stride() if isinstance(a.meta.get('val'), torch.Tensor) else ''}"
                    if isinstance(a, torch.fx.Node) else str(a)[:40] for a in node.args]
            print(node.name, node.target, tuple(val.shape), val.stride(), val.dtype, args, node.kwargs)
