"""A compile worker (run as a script, so that it imports Triton only: not ember, not torch, not
the parent's __main__).  Reads one job per line on stdin, JSON [path, name, specialization,
target]; compiles the kernel into Triton's cache; answers one line per job: "ok" or the error.

The specialization is the JSON Triton's `jit_cache_hook` receives; it is rebuilt as
`JITFunction.preload` rebuilds it, so the source, constants, attributes and options (and with
them the cache key) are the parent's.
"""
import importlib.util
import json
import os
import sys

# (run as a script, this folder leads sys.path, and its triton.py would shadow the package)
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or ".") != _HERE]


def compile_kernel(path: str, name: str, data: str, target: list) -> str:
    """Compiles the kernel `name` of the file `path` for `target` (backend, arch, warp size)."""
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile, make_backend

    spec = importlib.util.spec_from_file_location(f"ember_triton_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    function = getattr(module, name)
    payload = json.loads(data)
    constants = {
        tuple(key): tl.dtype(value) if tl.dtype.is_dtype(value) else
        tl.constexpr(value["constexpr"]) if isinstance(value, dict) and "constexpr" in value else value
        for key, value in zip(payload["constant_keys"], payload["constant_vals"])}
    attrs = dict(zip(map(tuple, payload["attrs_keys"]), payload["attrs_vals"]))
    signature = {key: _tuples(value) for key, value in payload["signature"].items()}
    options = {key: tuple(value) if isinstance(value, list) else value for key, value in payload["options"].items()}
    gpu = GPUTarget(*target)
    options = make_backend(gpu).parse_options(options)
    compile(ASTSource(function, signature, constants, attrs), target=gpu, options=options.__dict__)
    return name


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def main() -> None:
    for line in sys.stdin:
        try:
            compile_kernel(*json.loads(line))
            answer = "ok"
        except BaseException as error:  # noqa: BLE001 (the parent compiles it and reports)
            answer = f"{type(error).__name__}: {error}".replace("\n", " ")[:2000]
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
