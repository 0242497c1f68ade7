"""C++/OpenMP code for a fused kernel.

    extern "C" void kernel0(const float* in_ptr0, float* out_ptr0, float* out_ptr1)
    {
        #pragma omp parallel for
        for (int64_t x0 = 0; x0 < 8192; x0++) {      // outer ranges, shared by every node
            ...reduction loops, then pointwise loops over the inner ranges...
        }
    }

Loop bodies come from the IR's `inner_fn(ops, index)` called with `CppOps` (ops.py), which writes
one C++ statement per operation into the current block and returns its temporary; a value stored
earlier in the same loop is reused instead of reloaded.
"""
from __future__ import annotations

import re

import sympy
import torch

from ...lowering.indexing import c_index, contiguous_strides
from ...lowering.symbolic import provably_nonnegative, size_symbols
from ...lowering.printer import provenance
from ...lowering.ir import ComputedBuffer, Reduction, Scatter, index_vars, product, store_layout
from ...scheduling.scheduler import Kernel, LoopGroup, squeeze
from ..kernel import Emitter, Scope, loop_index
from .ops import _LOW_PRECISION, PARALLEL_THRESHOLD, PREAMBLE, WELFORD_LANES, CppOps, cast_value, ctype, literal


def _block(lines) -> list[str]:
    """`lines` as a C++ block: braces around them, indented."""
    return ["{", *("    " + line for line in lines), "}"]


def _nest(loops, body: list[str]) -> list[str]:
    """`body` inside `loops` ((pragma or None, for header) pairs, the outermost first), each a block."""
    for pragma, header in reversed(loops):
        body = [*([pragma] if pragma else []), header, *_block(body)]
    return body


class CppKernel(Emitter):
    ASSIGN = "auto {name} = {expr};"
    INDEX_CAST = "int64_t {name} = static_cast<int64_t>({value});"
    INDEX_WRAP = "{name} = {name} < 0 ? {name} + {size} : {name};"
    INDEX_BAD = "bool {name}_bad = static_cast<uint64_t>({name}) >= static_cast<uint64_t>({size});"
    INDEX_CLAMP = "{name} = {name}_bad ? 0 : {name};"

    def __init__(self, kernel: Kernel, buffer_dtypes: dict[str, torch.dtype]) -> None:
        super().__init__()
        self.kernel = kernel
        self.buffer_dtypes = buffer_dtypes
        self.outputs: list[str] = [node.name for node in kernel.nodes]
        self.ops = CppOps(self)
        self.emitted: set[str] = set()  # nodes already stored (a Welford pass stores its partner too)
        self.converts_to_integer = False  # (a value converted to an integer type: see source())
        self.size_args: set[str] = set()  # size symbols the kernel uses: int64_t arguments

    def flag_bad_index(self, name: str, position: int) -> str:
        """`ember_oob`'s bit `position` reports an out-of-range index there."""
        return f"ember_oob |= {name}_bad ? {1 << min(position, 62)}L : 0L;"

    def text(self, expr) -> str:
        return self.c(expr)

    def index(self, expr) -> str:
        return self.c(expr, self.bounds)

    def c(self, expr, bounds: dict | None = None) -> str:
        """An index or size expression in C; the size symbols it uses become kernel arguments."""
        expr = sympy.sympify(expr)
        if not expr.is_number:
            self.size_args.update(s.name for s in size_symbols(expr))
        return c_index(expr, bounds)

    def loop(self, var, size) -> str:
        return f"for (int64_t {var} = 0; {var} < {self.c(size)}; {var}++)"

    def reduction_vars(self, ranges: list, looped: list) -> tuple[list, list]:
        """r0, r1, ... over `ranges` (bounded in the `looped` dims), and the index they make (0 in the others)."""
        rvars = index_vars(len(ranges), "r")
        self.bounds.update({rvars[d]: ranges[d] - 1 for d in looped})
        return rvars, [rvars[d] if d in looped else sympy.Integer(0) for d in range(len(ranges))]

    def threading(self, work) -> str:
        """The OpenMP clause that keeps a small kernel on one thread (decided at run time for
        symbolic sizes): threads cost microseconds to wake (ATen's grain size is 32768)."""
        work = sympy.sympify(work)
        if work.is_number:
            return "" if int(work) >= PARALLEL_THRESHOLD else " if(0)"
        return f" if({self.c(work)} >= {PARALLEL_THRESHOLD})"

    def source(self) -> str:
        """The whole translation unit: preamble and this kernel."""
        body = self.generate()
        # Under -fno-trapping-math g++ folds float(int(x)) into trunc(x), which keeps the sign
        # of -0.0 and -0.5 (eager gives +0.0); kernels that convert to integers trap as usual.
        header = '#pragma GCC optimize ("trapping-math")\n' if self.converts_to_integer else ""
        return header + PREAMBLE + "\n" + body + "\n"

    def size_arguments(self) -> list[str]:
        """The kernel's size arguments in order (after the buffers, before the bounds-check flag)."""
        return sorted(self.size_args, key=_natural)

    # -- blocks and temporaries --------------------------------------------------------------------
    def push_block(self) -> Scope:
        self.scope = Scope(self.scope)
        return self.scope

    def pop_scope(self) -> Scope:
        """The current scope, closed (its lines are the caller's to place)."""
        block = self.scope
        self.scope = block.parent
        return block

    def pop_block(self) -> Scope:
        block = self.pop_scope()
        self.scope.lines += _block(block.lines)
        return block

    # -- generation ---------------------------------------------------------------------------------------
    def generate(self) -> str:
        if isinstance(self.kernel.nodes[0].data, Scatter):
            return self._finish(self._scatter(self.kernel.nodes[0]))
        outer = list(self.kernel.outer)
        if self._column_reductions_apply():
            self.threaded = self.threading(self._work())
            return self._finish(self._column_reductions())
        has_reduction = any(isinstance(node.data, Reduction) for node in self.kernel.nodes)
        # Pointwise kernels keep their last dimension as an inner loop so it vectorizes.
        self.vector_dim = outer[-1] if outer and not has_reduction else None
        self.threaded = self.threading(self._work())
        loop_outer = outer if has_reduction or not outer else outer[:-1]
        self.loop_outer = loop_outer
        outer_vars = index_vars(len(loop_outer), "x")
        self.bounds.update({var: size - 1 for var, size in zip(outer_vars, loop_outer)})
        body = self.scope = Scope()
        for group in self.kernel.groups():
            self._group(group, outer_vars)
        if not loop_outer:
            return self._finish(body.lines)
        collapse = f" collapse({len(loop_outer)})" if len(loop_outer) > 1 else ""
        return self._finish([f"#pragma omp parallel for{collapse}{self.threaded}",
                             *(self.loop(var, size) for var, size in zip(outer_vars, loop_outer)), *_block(body.lines)])

    def _finish(self, lines: list[str]) -> str:
        parameters = [f"const {ctype(self.buffer_dtypes[name])}* __restrict__ in_ptr{k}"
                      for k, name in enumerate(self.inputs)]
        parameters += [f"{ctype(self.buffer_dtypes[name])}* __restrict__ out_ptr{k}" for k, name in enumerate(self.outputs)]
        if self.size_args:
            # Symbolic sizes, by name (natural order: s2 before s10), after the buffers.
            parameters += [f"const int64_t {name}" for name in self.size_arguments()]
        if self.index_checks:
            # Every loop ORs its threads' and lanes' findings into ember_oob; the caller reads it.
            parameters.append("int64_t* __restrict__ oob_ptr")
            lines = ["int64_t ember_oob = 0;",
                     *(line + " reduction(|:ember_oob)" if line.lstrip().startswith("#pragma omp") else line
                       for line in lines),
                     "if (ember_oob) *oob_ptr |= ember_oob;"]
        text = [f"// {node.name}: {provenance(node)}" for node in self.kernel.nodes]
        text += [f'extern "C" void {self.kernel.name}({", ".join(parameters)})', *_block(lines)]
        return "\n".join(text)

    # -- column reductions: reduce over rows, vectorize across the output ---------------------------
    def _column_reductions_apply(self) -> bool:
        """Reductions over the leading dimensions of a row-major tensor (bias and norm-weight
        gradients: [rows, 128] -> [128]) read with a large stride in the reduction loop; looping
        over the reduction outside and over 16 outputs inside reads whole cache lines instead."""
        from ...lowering.analysis import record

        nodes = self.kernel.nodes
        if len(self.kernel.outer) != 1 or not all(isinstance(n.data, Reduction) for n in nodes):
            return False
        # Every accumulator advances in the same row loop, so a reduction that reads another
        # one's result (softmax's sum(exp(x - amax)) over a leading dim) would read it unwritten.
        names = {node.name for node in nodes}
        if any(name in names for node in nodes for name, _ in record(node.data).loads):
            return False
        first = nodes[0].data
        for node in nodes:
            spec = node.data.spec
            if _REDUCTION_CLAUSE.get((spec.reduction_type, ctype(spec.src_dtype))) is None or \
                    list(spec.reduction_ranges) != list(first.spec.reduction_ranges) or \
                    squeeze(node.data.ranges) != list(self.kernel.outer):
                return False
        ranges = list(first.ranges)
        reduction_ranges = list(first.spec.reduction_ranges)
        inner_r = [d for d, size in enumerate(reduction_ranges) if size != 1]
        if not inner_r:
            return False
        out_var = index_vars(len(ranges))[[d for d, size in enumerate(ranges) if size != 1][0]]
        last_r = index_vars(len(reduction_ranges), "r")[inner_r[-1]]
        expanded = [sympy.expand(index) for node in nodes for _, index in record(node.data).loads]
        return any(index.coeff(out_var) == 1 and index.coeff(last_r) not in (0, 1) for index in expanded)

    def _column_reductions(self) -> list[str]:
        lanes = WELFORD_LANES
        size = self.kernel.outer[0]
        nodes = self.kernel.nodes
        first = nodes[0].data
        reduction_ranges = list(first.spec.reduction_ranges)
        block, lane = (sympy.Symbol(name, integer=True, nonnegative=True) for name in ("xb", "xl"))
        self.bounds.update({block: size - 1, lane: lanes - 1})
        position = block + lane
        loop_dims = [d for d, n in enumerate(reduction_ranges) if n != 1]
        rvars, rindex = self.reduction_vars(reduction_ranges, loop_dims)
        self.scope = Scope()
        self.loop_outer = [size]
        accumulators = []
        for node in nodes:
            spec = node.data.spec
            acc_type = ctype(spec.src_dtype)
            name = self.new_temp("acc")
            init = _reduction_init(spec.reduction_type, spec.src_dtype, acc_type)
            accumulators.append((node, name, acc_type, init))
        self.push_block()
        for node, name, acc_type, _ in accumulators:
            value = node.data.inner_fn(self.ops, loop_index(node.data.ranges, [position]), rindex)
            self.scope.lines.append(_UPDATES[node.data.spec.reduction_type].format(acc=f"{name}[xl]", value=value,
                                                                                  type=acc_type))
        inner = _nest([*((None, self.loop(rvars[d], reduction_ranges[d])) for d in loop_dims),
                       ("#pragma omp simd", "for (int64_t xl = 0; xl < xn; xl++)")], self.pop_scope().lines)
        lines = [f"#pragma omp parallel for{self.threaded}",
                 f"for (int64_t xb = 0; xb < {self.c(size)}; xb += {lanes})", "{",
                 f"    int64_t xn = std::min<int64_t>({lanes}, {self.c(size)} - xb);"]
        for node, name, acc_type, init in accumulators:
            lines.append(f"    {acc_type} {name}[{lanes}];")
            lines.append(f"    for (int64_t xl = 0; xl < {lanes}; xl++) {name}[xl] = {init};")
        lines += ["    " + line for line in inner]
        for node, name, acc_type, _ in accumulators:
            index = loop_index(node.data.ranges, [position])
            store_index = self.index(store_layout(node).index(index))
            out = self.outputs.index(node.name)
            lines.append(f"    for (int64_t xl = 0; xl < xn; xl++) out_ptr{out}[{store_index}] = "
                         f"{cast_value(f'{name}[xl]', node.dtype)};")
        lines.append("}")
        return lines

    # -- scatter: a base pass over the output, then the updates in order ----------------------------
    def _scatter(self, node: ComputedBuffer) -> list[str]:
        data: Scatter = node.data
        root = self.scope = Scope()
        self.threaded = self.threading(product(data.out_ranges))

        def base(index):
            value = data.base(self.ops, index)
            self.scope.lines.append(f"out_ptr0[{self.index(node.layout.index(index))}] = {value};")

        def update(index):
            target = data.target(self.ops, index)
            value = data.inner_fn(self.ops, index)
            destination = f"out_ptr0[{self.index(node.layout.index(target))}]"
            if data.accumulate:  # spelled out: float16/bfloat16 storage has no +=
                value = cast_value(f"{destination} + {value}", node.dtype)
            self.scope.lines.append(f"{destination} = {value};")

        self._loop_nest("o", data.out_ranges, base, parallel=True, simd=True)
        # Updates may collide, so they run in order on one thread; only an innermost dimension that
        # maps straight to distinct outputs is vectorized.
        self._loop_nest("u", data.ranges, update, parallel=False, simd=data.direct_inner)
        return root.lines

    def _loop_nest(self, prefix: str, sizes, emit, parallel: bool, simd: bool) -> None:
        variables = index_vars(len(sizes), prefix)
        index = [var if size != 1 else sympy.Integer(0) for var, size in zip(variables, sizes)]
        active = [(var, size) for var, size in zip(variables, sizes) if size != 1]
        self.bounds.update({var: size - 1 for var, size in active})
        self.push_block()
        emit(index)
        lines = _block(self.pop_scope().lines)
        for depth, (var, size) in enumerate(reversed(active)):
            innermost, outermost = depth == 0, depth == len(active) - 1
            pragma = None
            if parallel and outermost:
                pragma = "#pragma omp parallel for" + (" simd" if innermost and simd else "") + self.threaded
            elif simd and innermost:
                pragma = "#pragma omp simd"
            lines = ([pragma] if pragma else []) + [self.loop(var, size), *lines]
        self.scope.lines.extend(lines)

    def _work(self):
        """Elements the kernel touches (its largest loop nest; with symbolic sizes, the first
        one's that is not known smaller)."""
        largest = 0
        for node in self.kernel.nodes:
            data = node.data
            total = product([*data.ranges, *(data.spec.reduction_ranges if isinstance(data, Reduction) else [])])
            if total.is_number and sympy.sympify(largest).is_number:
                largest = max(largest, int(total))
            elif sympy.sympify(largest).is_number:
                largest = total  # symbolic beats a number (sizes are unbounded)
            elif not total.is_number and provably_nonnegative(total - largest) and total != largest:
                largest = total
        return largest

    def _group(self, group: LoopGroup, outer_vars) -> None:
        if group.reduction:
            self._reduction(group.nodes[0], outer_vars)
            return
        inner_sizes = ([self.vector_dim] if self.vector_dim is not None else []) + list(group.inner)
        vector = [sympy.Symbol("xv", integer=True, nonnegative=True)] if self.vector_dim is not None else []
        inner_vars = vector + index_vars(len(group.inner), "y")
        self.bounds.update({var: size - 1 for var, size in zip(inner_vars, inner_sizes)})
        loops = []
        for depth, (var, size) in enumerate(zip(inner_vars, inner_sizes)):
            innermost = depth == len(inner_sizes) - 1
            if depth == 0 and not self.loop_outer:
                pragma = ("#pragma omp parallel for simd" if innermost else "#pragma omp parallel for") + self.threaded
            else:
                pragma = "#pragma omp simd" if innermost else None
            loops.append((pragma, self.loop(var, size)))
        body = self.push_block() if loops else self.scope
        for node in group.nodes:
            index = loop_index(node.data.ranges, [*outer_vars, *inner_vars])
            value = node.data.inner_fn(self.ops, index)
            if node.dtype in _LOW_PRECISION:  # later readers in this kernel see the stored precision
                value = self.ops.to_dtype(value, node.dtype)
            self.scope.stored[(node.name, self._store(node, index, value))] = value
        if loops:
            self.pop_scope()
            self.scope.lines += _nest(loops, body.lines)

    def _store(self, node: ComputedBuffer, index, value: str) -> str:
        """Stores `value` at the node's element `index`; the store's index text."""
        store_index = self.index(store_layout(node).index(index))
        self.scope.lines.append(f"out_ptr{self.outputs.index(node.name)}[{store_index}] = {value};")
        return store_index

    def _welford(self, node: ComputedBuffer, outer_vars) -> None:
        """Mean and m2 in one pass: Welford updates in 16 independent lanes over the innermost
        reduction dimension (so the update loop vectorizes; every lane has seen the same count), a
        scalar Welford for the leftover elements, then Chan's combination of lanes and leftovers.
        When the kernel also holds the partner (mean with m2), both are stored from this one loop."""
        data: Reduction = node.data
        if node.name in self.emitted:
            return
        mean_name, m2_name = data.partner or (None, None)
        partners = [n for n in self.kernel.nodes if n.name in (mean_name, m2_name)] if data.partner else [node]
        # Accumulated in double, as ATen's CPU var/std: a float running mean rounding at every update
        # is off by several times eager's error (test_welford_over_a_short_inner_dimension_keeps_layer_norm_accurate)
        acc = "double"
        ranges = list(data.spec.reduction_ranges)
        loop_dims = [d for d, size in enumerate(ranges) if size != 1]
        lanes = WELFORD_LANES
        name = self.new_temp("welford")
        lines = self.scope.lines
        lines.append(f"{acc} {name}_mean[{lanes}] = {{}}; {acc} {name}_m2[{lanes}] = {{}}; {acc} {name}_n = 0;")
        lines.append(f"{acc} {name}_tmean = 0, {name}_tm2 = 0, {name}_tn = 0;")
        index = loop_index(node.data.ranges, outer_vars)
        inner_dim = loop_dims[-1] if loop_dims else None
        inner_size = ranges[inner_dim] if inner_dim is not None else 1
        symbolic = not sympy.sympify(inner_size).is_number
        if symbolic:  # blocks of 16 and a tail, sized at run time
            blocks = sympy.floor(inner_size / lanes)
            tail_start = blocks * lanes
        else:
            inner_size = int(inner_size)
            blocks, tail_start = inner_size // lanes, (inner_size // lanes) * lanes
        outer_dims = loop_dims[:-1]
        rvars, outer_index = self.reduction_vars(ranges, outer_dims)

        def body(inner_expr, update):
            rindex = list(outer_index)
            if inner_dim is not None:
                rindex[inner_dim] = inner_expr
            self.push_block()
            self.scope.lines.extend(update(data.inner_fn(self.ops, index, rindex)))
            return self.pop_scope().lines

        nest: list[str] = []
        if symbolic or blocks:
            block_var = sympy.Symbol(f"{name}_b", integer=True, nonnegative=True)
            lane_var = sympy.Symbol(f"{name}_l", integer=True, nonnegative=True)
            self.bounds.update({block_var: blocks - 1, lane_var: lanes - 1})
            lane_body = body(block_var * lanes + lane_var, lambda v: [
                f"{acc} delta = static_cast<{acc}>({v}) - {name}_mean[{lane_var}];",
                f"{name}_mean[{lane_var}] += delta * {name}_inv;",
                f"{name}_m2[{lane_var}] += delta * (static_cast<{acc}>({v}) - {name}_mean[{lane_var}]);"])
            nest += [f"for (int64_t {block_var} = 0; {block_var} < {self.c(blocks) if symbolic else blocks}; {block_var}++)", "{",
                     f"    {name}_n += 1; {acc} {name}_inv = 1 / {name}_n;", "    #pragma omp simd",
                     f"    for (int64_t {lane_var} = 0; {lane_var} < {lanes}; {lane_var}++)", "    {",
                     *("        " + line for line in lane_body), "    }", "}"]
        if symbolic or tail_start < inner_size or inner_dim is None:
            tail_var = sympy.Symbol(f"{name}_t", integer=True, nonnegative=True)
            self.bounds[tail_var] = inner_size - 1
            tail_body = body(tail_var, lambda v: [
                f"{name}_tn += 1; {acc} delta = static_cast<{acc}>({v}) - {name}_tmean;",
                f"{name}_tmean += delta / {name}_tn;",
                f"{name}_tm2 += delta * (static_cast<{acc}>({v}) - {name}_tmean);"])
            nest += [f"for (int64_t {tail_var} = {self.c(tail_start) if symbolic else tail_start}; {tail_var} < "
                     f"{self.c(inner_size) if symbolic else inner_size}; {tail_var}++)", *_block(tail_body)]
        lines.extend(_nest([(None, self.loop(rvars[d], ranges[d])) for d in outer_dims], nest))
        lines.append(f"{acc} {name}_rmean = 0, {name}_rm2 = 0, {name}_rn = 0;")
        lines.append(f"for (int {name}_k = 0; {name}_k < {lanes}; {name}_k++) ember_welford_combine({name}_rmean, "
                     f"{name}_rm2, {name}_rn, {name}_mean[{name}_k], {name}_m2[{name}_k], {name}_n);")
        lines.append(f"ember_welford_combine({name}_rmean, {name}_rm2, {name}_rn, {name}_tmean, {name}_tm2, {name}_tn);")
        for member in partners:
            result = f"{name}_rmean" if member.data.spec.reduction_type == "welford_mean" else f"{name}_rm2"
            value = self.emit(cast_value(result, member.dtype))
            self.scope.stored[(member.name, self._store(member, index, value))] = value
            self.emitted.add(member.name)

    def _reduction(self, node: ComputedBuffer, outer_vars) -> None:
        data: Reduction = node.data
        spec = data.spec
        kind = spec.reduction_type
        if kind in ("welford_mean", "welford_m2"):
            self._welford(node, outer_vars)
            return
        acc_type = ctype(spec.src_dtype if kind not in ("any", "all") else torch.bool)
        accumulator = self.new_temp("acc")
        index_name = self.new_temp("acc_index") if kind in ("argmax", "argmin") else None
        init = _reduction_init(kind, spec.src_dtype, acc_type)
        self.scope.lines.append(f"{acc_type} {accumulator} = {init};")
        if index_name:
            self.scope.lines.append(f"int64_t {index_name} = 0;")
        # One loop per reduction dimension (size-1 dimensions skipped), so that the innermost
        # loop walks memory with a constant stride and vectorizes; no divisions in the index.
        ranges = list(spec.reduction_ranges)
        loop_dims = [d for d, size in enumerate(ranges) if size != 1] or ([len(ranges) - 1] if ranges else [])
        rvars, rindex = self.reduction_vars(ranges, loop_dims)
        flat_position = self.c(sum((rvars[d] * stride for d, stride in
                                     zip(range(len(ranges)), contiguous_strides(ranges)) if d in loop_dims),
                                    sympy.Integer(0)))
        parallel_inside = not self.loop_outer
        self.push_block()
        index = loop_index(node.data.ranges, outer_vars)
        value = data.inner_fn(self.ops, index, rindex)
        self.scope.lines.append(_UPDATES[kind].format(acc=accumulator, value=value, type=acc_type, index=index_name,
                                                      position=flat_position))
        inner = self.pop_scope()
        clause = _REDUCTION_CLAUSE.get((kind, acc_type))
        loops = []
        for depth, d in enumerate(loop_dims):
            outermost, innermost = depth == 0, depth == len(loop_dims) - 1
            pragma = None
            if clause and outermost and parallel_inside:
                pragma = f"#pragma omp parallel for{' simd' if innermost else ''} reduction({clause}:{accumulator})" \
                    + self.threaded
            elif clause and innermost:
                pragma = f"#pragma omp simd reduction({clause}:{accumulator})"
            loops.append((pragma, self.loop(rvars[d], ranges[d])))
        self.scope.lines.extend(_nest(loops, inner.lines) if loop_dims else _block(inner.lines))
        result = index_name if index_name else accumulator
        if node.dtype != spec.src_dtype or index_name:
            result = cast_value(result, node.dtype)
        store_index = self._store(node, index, result)
        self.scope.stored[(node.name, store_index)] = result if not result.startswith("static_cast") else \
            self.emit(result)


def _natural(name: str):
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _reduction_init(kind: str, dtype: torch.dtype, acc_type: str) -> str:
    """The accumulator's starting value: the identity of the reduction."""
    floating = dtype.is_floating_point
    lowest = f"-std::numeric_limits<{acc_type}>::infinity()" if floating else f"std::numeric_limits<{acc_type}>::lowest()"
    highest = f"std::numeric_limits<{acc_type}>::infinity()" if floating else f"std::numeric_limits<{acc_type}>::max()"
    return {"sum": literal(0, dtype), "prod": literal(1, dtype), "max": lowest, "argmax": lowest, "min": highest,
            "argmin": highest, "any": "false", "all": "true"}[kind]


# A reduction's update of its accumulator `acc` by `value` (argmax/argmin: also its `index`).
_UPDATES = {
    "sum": "{acc} = {acc} + {value};", "prod": "{acc} = {acc} * {value};",
    "max": "{acc} = ember_maximum({acc}, static_cast<{type}>({value}));",
    "min": "{acc} = ember_minimum({acc}, static_cast<{type}>({value}));",
    "any": "{acc} = {acc} || static_cast<bool>({value});", "all": "{acc} = {acc} && static_cast<bool>({value});",
    "argmax": "if (!({acc} != {acc}) && (({value}) > {acc} || ({value}) != ({value}))) {{ {acc} = {value}; {index} = "
              "{position}; }}",
    "argmin": "if (!({acc} != {acc}) && (({value}) < {acc} || ({value}) != ({value}))) {{ {acc} = {value}; {index} = "
              "{position}; }}",
}


# (reduction, C type) -> the OpenMP reduction identifier that lets the loop vectorize (and split
# across threads).  max/min on floating point use ember's NaN-propagating reductions declared in
# the preamble; argmax/argmin, any/all stay sequential.
_REDUCTION_CLAUSE = {}
for _type in ("float", "double", "int64_t", "int32_t", "int16_t", "int8_t", "uint8_t"):
    _REDUCTION_CLAUSE[("sum", _type)] = "+"
    _REDUCTION_CLAUSE[("prod", _type)] = "*"
    _floating = _type in ("float", "double")
    _REDUCTION_CLAUSE[("max", _type)] = f"ember_max_{_type}" if _floating else "max"
    _REDUCTION_CLAUSE[("min", _type)] = f"ember_min_{_type}" if _floating else "min"

