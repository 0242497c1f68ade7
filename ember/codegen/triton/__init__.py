"""The GPU kernel backend: Triton kernels (kernel.py, ops.py, reduce.py), partitioned into
Triton kernels (split.py), compiled in worker processes (pool.py, worker.py), tuned (tune.py)
and launched (backend.py)."""
