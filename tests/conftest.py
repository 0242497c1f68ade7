import os

import torch

# Without a GPU, Triton kernels run in Triton's interpreter on CPU tensors (tests/codegen/
# test_triton_kernels.py).  It must be chosen before anything imports triton (torch.compile's
# reference runs do; triton's own library functions are @triton.jit too).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
    from tests.triton_rounding import round_like_the_gpu

    round_like_the_gpu()

import ember

# In tests an internal capture error fails loudly instead of quietly running eagerly.
ember.config.set(raise_capture_errors=True)
# A lowering rule that crashes fails the test instead of quietly becoming an ATen call.
ember.config.set(raise_lowering_errors=True)
