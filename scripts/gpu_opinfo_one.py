"""One OpInfo entry through ember on the GPU, its generated code logged: a debugging aid for
a failure of the CUDA sweep.   python scripts/gpu_opinfo_one.py lu backward float32"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "autograd"))

import torch  # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

import opinfo_sweep  # noqa: E402

name, kind, dtype = sys.argv[1], sys.argv[2], sys.argv[3]
original = opinfo_sweep.COMPILERS["ember"]


def showing(gm, example_inputs):  # each ATen graph before it is compiled
    print(gm.code, file=sys.stderr, flush=True)
    return original(gm, example_inputs)


opinfo_sweep.COMPILERS["ember"] = showing
opinfo_sweep.DEVICE[0] = "cuda"
opinfo_sweep.DTYPE[0] = getattr(torch, dtype)
for op in op_db:
    if op.name == name and not op.variant_test_name:
        print(name, kind, dtype, "->", opinfo_sweep.outcome(op, kind, "ember"))
        torch.cuda.synchronize()
