"""Compiling generated C++ into shared libraries, cached on disk, loaded with ctypes.

Each kernel is its own library named by a hash of its source and the compiler flags, under
`ember.config.cache_dir`: identical kernels compile once, independent ones in parallel.  Processes
building the same kernel at once each compile a private copy and publish it with os.replace, so
none sees a partial file.  A cached library that does not load (truncated, corrupted) is rebuilt
from source, with a warning.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import functools
import hashlib
import os
import shutil
import struct
import subprocess
import tempfile
import warnings

from ... import logs
from ..kernel import KernelCompileError, cache_dir

log_fallbacks = logs.get("fallbacks")

# -D__FAST_MATH__ (without -ffast-math's semantics) only makes glibc declare its vector math
# functions (libmvec: exp, erf, tanh, ... on 8 floats at a time) so `#pragma omp simd` loops
# with transcendental functions vectorize; NaN/inf handling stays IEEE (no -ffinite-math-only).
# -fwrapv: signed integer arithmetic wraps around, as eager's does (overflow is not undefined).
# -mprefer-vector-width=512: on CPUs with AVX-512, g++ otherwise stays at 256-bit vectors; the
# full width halves the time of transcendental-heavy kernels (tanh-GELU: 73 -> 33 us on 256x512).
CXX_FLAGS = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-shared", "-fPIC", "-std=c++17", "-ffp-contract=off",
             "-fno-math-errno", "-fno-trapping-math", "-fwrapv", "-D__FAST_MATH__", "-Wno-unused-variable"]
LINK_FLAGS = ["-lmvec"]


# g++ 12 with -march=native on AVX512-FP16 CPUs emits masked `vmovsh`, which binutils 2.40's
# assembler rejects: such a kernel is built again without those instructions (ember computes
# float16 in float32 anyway; test_half_kernels_build_where_the_assembler_rejects_avx512fp16_masking).
_ASSEMBLER_FALLBACK_FLAGS = ["-mno-avx512fp16"]


def _assembler_rejected(stderr: str) -> bool:
    """Did the assembler (not the compiler) refuse what g++ generated (`/tmp/cc*.s:163: Error:`)?"""
    return any(".s:" in line and "Error:" in line for line in stderr.splitlines())


# Optimization levels to fall back to when the compiler rejects a kernel at -O3 (g++ 12 stopped
# with an internal compiler error on one); a kernel none of them builds raises KernelCompileError,
# and compile.py runs its graph as ATen calls.
_LOWER_OPTIMIZATION = ["-O1", "-O0"]


def _run_compiler(flags: list[str], source: str, library: str) -> subprocess.CompletedProcess:
    return subprocess.run([compiler(), *flags, source, "-o", library, *LINK_FLAGS], capture_output=True, text=True)


def _flag_difference(flags: list[str]) -> str:
    """How `flags` differ from CXX_FLAGS, for messages ("-O3", "-mno-avx512fp16", "-O1 -mno-avx512fp16")."""
    extra = [flag for flag in flags if flag not in CXX_FLAGS]
    return " ".join(extra) or " ".join(flag for flag in CXX_FLAGS if flag.startswith("-O"))


def _first_error(stderr: str) -> str:
    """The line of the compiler's output that says what went wrong (an internal compiler error
    first: its "unrecognizable insn" line comes before it)."""
    lines = [line.strip() for line in stderr.splitlines()]
    for marker in ("internal compiler error", "error"):
        found = [line for line in lines if marker in line.lower()]
        if found:
            return found[0][:300]
    return (stderr.strip() or "no message")[:300]


class CompilerNotFound(RuntimeError):
    pass


@functools.lru_cache(maxsize=1)
def compiler() -> str:
    requested = os.environ.get("CXX")
    found = shutil.which(requested) if requested else (shutil.which("g++") or shutil.which("c++"))
    if not found:
        raise CompilerNotFound(
            "ember's CPU backend needs a C++ compiler with OpenMP, and none was found: install g++ "
            "(Debian/Ubuntu: apt-get install g++; then it is picked up from PATH or $CXX)")
    return found


def _key(source: str) -> str:
    digest = hashlib.sha256()
    digest.update(source.encode())
    digest.update(" ".join([compiler(), *CXX_FLAGS, *LINK_FLAGS]).encode())
    return digest.hexdigest()[:24]


# library path -> the source it was built from, to rebuild a cached library that does not load
_SOURCES: dict[str, str] = {}


def build(source: str) -> str:
    """Path of a shared library built from `source` (reused when it already exists)."""
    key = _key(source)
    library = os.path.join(cache_dir(), f"k_{key}.so")
    _SOURCES[library] = source
    if not os.path.exists(library):
        _compile(source, library)
    return library


def _compile(source: str, library: str) -> None:
    """g++ `source` into `library`, publishing the library and its source (`k_<key>.cpp`, kept
    for reading and error messages) only once each is complete."""
    directory, stem = os.path.dirname(library), os.path.basename(library)[:-len(".so")]
    handle, private_source = tempfile.mkstemp(dir=directory, prefix=f"{stem}.", suffix=".tmp.cpp")
    with os.fdopen(handle, "w") as file:
        file.write(source)
    handle, partial = tempfile.mkstemp(dir=directory, prefix=f"{stem}.", suffix=".tmp.so")
    os.close(handle)
    source_path = os.path.join(directory, f"{stem}.cpp")
    try:
        failures = []
        flags = list(CXX_FLAGS)
        for level in [None, *_LOWER_OPTIMIZATION]:
            if level is not None:
                flags = [level if flag.startswith("-O") else flag for flag in flags]
            result = _run_compiler(flags, private_source, partial)
            if result.returncode != 0 and _assembler_rejected(result.stderr) and \
                    _ASSEMBLER_FALLBACK_FLAGS[0] not in flags:
                failures.append((flags, result.stderr))
                flags = [*flags, *_ASSEMBLER_FALLBACK_FLAGS]
                result = _run_compiler(flags, private_source, partial)
            if result.returncode == 0:
                break
            failures.append((flags, result.stderr))
        os.replace(private_source, source_path)
        if result.returncode != 0:
            raise KernelCompileError(
                f"{os.path.basename(compiler())} could not compile an ember kernel (tried "
                f"{'; '.join(_flag_difference(flags) for flags, _ in failures)}); its source is "
                f"{source_path}\n{failures[0][1][-3000:]}")
        if failures:
            log_fallbacks.debug("kernel %s built with %s: %s failed (%s)", source_path, _flag_difference(flags),
                                _flag_difference(failures[0][0]), _first_error(failures[0][1]))
        os.replace(partial, library)
    finally:
        for leftover in (private_source, partial):
            if os.path.exists(leftover):
                os.unlink(leftover)


_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=max(os.cpu_count() or 1, 1))


def build_all(sources: list[str]) -> list[str]:
    return list(_POOL.map(build, sources))


@functools.lru_cache(maxsize=None)
def load(path: str) -> ctypes.CDLL:
    source = _SOURCES.get(path)
    if source is None:
        return ctypes.CDLL(path)
    # A cached library cut short (a full disk, a killed copy) must not reach dlopen: it maps the
    # missing pages anyway and the process dies of SIGBUS on first touch.  Garbage fails dlopen.
    problem = None if _is_complete_elf(path) else "the file is truncated"
    if problem is None:
        try:
            return ctypes.CDLL(path)
        except OSError as error:
            problem = str(error)
    warnings.warn(f"ember: the cached kernel {path} could not be loaded ({problem}); deleted it and "
                  f"rebuilt it from source")
    with contextlib.suppress(FileNotFoundError):  # (another process got there first)
        os.unlink(path)
    _compile(source, path)
    return ctypes.CDLL(path)


_ELF64_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_ELF64_PROGRAM_HEADER = struct.Struct("<IIQQQQQQ")
_PT_LOAD = 1


def _is_complete_elf(path: str) -> bool:
    """False when a 64-bit little-endian ELF file ends before what its headers say it holds (its
    loadable segments and its section header table, which the linker writes last)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    if len(data) < _ELF64_HEADER.size or data[:4] != b"\x7fELF":
        return False
    if data[4] != 2 or data[5] != 1:  # not ELF64 little-endian: leave the judgement to dlopen
        return True
    header = _ELF64_HEADER.unpack_from(data)
    phoff, shoff, phentsize, phnum, shentsize, shnum = header[5], header[6], header[9], header[10], header[12], header[13]
    if phoff + phnum * phentsize > len(data) or shoff + shnum * shentsize > len(data):
        return False
    for index in range(phnum):
        kind, _, offset, _, _, filesz, _, _ = _ELF64_PROGRAM_HEADER.unpack_from(data, phoff + index * phentsize)
        if kind == _PT_LOAD and offset + filesz > len(data):
            return False
    return True
