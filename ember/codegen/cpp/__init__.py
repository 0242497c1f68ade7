"""The CPU kernel backend: C++/OpenMP kernels (kernel.py, ops.py), built by g++ (build.py),
called through ctypes (backend.py)."""
