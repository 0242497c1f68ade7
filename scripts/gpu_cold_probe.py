"""The cold first call of one model case with fresh compile caches, for EMBER_LOGS=perf (where a cold
compile goes: capture, AOT trace, lowering, kernels, Triton builds).

    EMBER_LOGS=perf python scripts/gpu_cold_probe.py vit infer
"""
import os, sys, time
sys.path.insert(0, "benchmarks")
import torch, ember
from gpu_models import build, step_function, fresh_compile_caches
fresh_compile_caches()
name, mode = sys.argv[1], sys.argv[2]
model, inputs, loss_of, _ = build(name, torch)
model.train(mode == "train")
run = step_function(model, inputs, loss_of, mode, torch)
run(model); torch.cuda.synchronize()
c = ember.compile(model, backend="ember")
t = time.perf_counter(); run(c); torch.cuda.synchronize()
print(f"{name} {mode} cold {time.perf_counter() - t:.2f} s")
