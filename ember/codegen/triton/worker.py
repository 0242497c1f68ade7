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

# (run as a script, this folder leads sys.path: its modules must not shadow Triton's own)
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
    source = ASTSource(function, signature, constants, attrs)
    kernel = compile(source, target=gpu, options=options.__dict__)
    if gpu.backend == "cuda":
        _build_launcher(function, source, kernel)
    return name


def _build_launcher(function, source, kernel) -> None:
    """Builds the kernel's C launcher into Triton's cache as the parent's first use would (gcc,
    ~0.5 s per signature).  An optimization only: where this Triton builds it otherwise, or
    loading it fails here (no libcuda), the parent builds or loads its own."""
    try:
        from triton.backends.nvidia.driver import include_dirs, libraries, library_dirs, make_launcher
        from triton.runtime.build import compile_module_from_src

        constants = {(function.arg_names.index(key),) if isinstance(key, str) else key: value
                     for key, value in source.constants.items()}
        text = make_launcher(constants, dict(source.signature), getattr(kernel.metadata, "tensordesc_meta", None))
        compile_module_from_src(src=text, name="__triton_launcher", library_dirs=library_dirs(),
                                include_dirs=include_dirs, libraries=libraries)
    except Exception:  # noqa: BLE001
        pass


def _tuples(value):
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def main() -> None:
    try:  # (Triton's compiler imported before the first job arrives: workers start early, prewarm)
        import triton.language  # noqa: F401
        from triton.compiler import ASTSource  # noqa: F401
    except BaseException:  # noqa: BLE001 (each job then reports it)
        pass
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
