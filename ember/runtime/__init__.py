"""Run-time wrappers around compiled graphs (CUDA graphs)."""
