"""Triton kernels from the same loop IR and schedule as the C++ ones (GPU code generation).

A scheduled kernel becomes one or more Triton kernels: pointwise only, a flat `xindex` over
every element in blocks of XBLOCK; with inner loops or reductions, 2-D blocks [XBLOCK, RBLOCK]
(x over the outer ranges, r over the rows), persistent when a row fits in one block (no loop,
every value in registers), else looped (`for roffset in range(0, rnumel, RBLOCK)`, accumulators
reduced after the loop).  A node must find a kernel-mate's value in registers (another thread
may hold the element); where it cannot, the kernel is split there (scheduling/gpu_partition.py).

Loads and stores index from the tensors' data pointers (less the storage offset the graph
planned); float16/bfloat16 are computed in float32, rounded where eager rounds.  Op spellings are
`TRITON_OPS` (ops.py); reductions are in reduce.py.  Data-dependent indices are bounds-checked
(an index out of range reads row 0 and sets a flag the wrapper turns into eager's IndexError).
Scatters are two kernels: the base copy, then the updates (accumulating ones with atomic adds).
"""
from __future__ import annotations

import os
from typing import Callable

import sympy
import torch

from ...lowering.indexing import simplify_index
from ...lowering.ir import ComputedBuffer, Pointwise, Reduction, product, store_layout
from ...lowering.printer import provenance
from ...lowering.symbolic import is_size_symbol
from ...scheduling.scheduler import Kernel, LoopGroup, squeeze
from ..kernel import Emitter, Scope, loop_index
from .ops import (_LOW_PRECISION, TL_DTYPES, TritonOps, TritonSource, _exact_quotient, next_power_of_2,
                  on_pointer, texpr)
from .reduce import _BLOCK_REDUCE, _Reducer


PERSISTENT_RNUMEL = 2048  # rows up to this many elements are reduced in one block, without a loop


class TritonKernel(Emitter):
    """Nodes of one scheduled kernel as one Triton kernel; a read of a kernel-mate's value the kernel
    does not hold is reported (`unheld`) to the partitioning pass (scheduling/gpu_partition.py)."""

    ASSIGN = "{name} = {expr}"
    INDEX_CAST = "{name} = {value}.to(tl.int64)"
    INDEX_WRAP = "{name} = tl.where({name} < 0, {name} + {size}, {name})"
    INDEX_BAD = "{name}_bad = ({name} < 0) | ({name} >= {size})"
    INDEX_CLAMP = "{name} = tl.where({name}_bad, 0, {name})"

    def __init__(self, nodes: list[ComputedBuffer], outer: list, buffer_dtypes: dict[str, torch.dtype],
                 offsets: dict | None = None, int64: bool = False, maybe_empty: frozenset = frozenset(),
                 internal: frozenset = frozenset()) -> None:
        super().__init__()
        self.nodes = nodes
        self.maybe_empty = maybe_empty  # buffers that may hold no element (a size 0)
        self.split = 0  # > 0: reduce the rows in this many chunks, one program each (split_reduction)
        self.partials: list = []  # split: (node, reduction kind, accumulator dtype) per workspace
        self.outer = list(outer)
        self.buffer_dtypes = buffer_dtypes
        self.offsets = offsets or {}  # buffer -> storage offset the graph planned (wrapper passes tensors)
        self.index_type = "tl.int64" if int64 else "tl.int32"
        self.own = {node.name for node in nodes}
        # Values only this kernel reads, where it computes them: kept in registers, never stored
        # (`elided`: no buffer).  A reduction's result is offered only for a kernel neither split nor cut.
        self.internal = {node.name for node in nodes if node.name in internal
                         and isinstance(node.data, (Pointwise, Reduction))}
        self.outputs = [node.name for node in nodes if node.name not in self.internal]
        self.conditions: list[str] = []  # masks of enclosing ops.masked
        self.size_symbols: set[str] = set()
        self.position = 0  # the node being generated
        self.unheld: tuple | None = None  # (position, name, kept) of the first read not served; then nothing more
        self.emitted: set[str] = set()
        self.loads_along = {"x": 0, "r": 0}  # loads contiguous in the innermost x / r variable
        self.indirect_dims: dict[str, set[str]] = {}  # data-dependent index -> its block dimensions

    # -- text helpers -----------------------------------------------------------------------------
    def tex(self, expr) -> str:
        expr = sympy.sympify(expr)
        self.size_symbols.update(s.name for s in expr.free_symbols if is_size_symbol(s))
        return texpr(expr)

    text = tex

    def simplified(self, index):
        """The index without the floors and mods its variables' ranges make idle (`(x2 + x1 // 512) %
        512` with x1, x2 < 512 is x2): fewer divisions, and the address's contiguity shows."""
        index = sympy.sympify(index)
        if not self.bounds or not index.has(sympy.floor, sympy.Mod):
            return index
        return simplify_index(index, self.bounds)

    def checked_index(self, value: str, size, site: str = "", wrap_negative: bool = True) -> sympy.Symbol:
        symbol = super().checked_index(value, size, site, wrap_negative)
        self.indirect_dims[symbol.name] = set(self.dims)
        return symbol

    def flag_bad_index(self, name: str, position: int) -> str:
        """Element `position` of `oob_ptr`: every lane holds the flag's address; the lanes inside
        the kernel's masks report."""
        masks = " & ".join([f"{dim}mask" for dim in self.dims] + [f"({c})" for c in self.conditions])
        spread = "".join(f" + 0 * {dim}index" for dim in self.dims)
        return f"tl.store(oob_ptr + {position} + 0 * {name}{spread}, 1, {masks} & {name}_bad)"

    @property
    def unit_shape(self) -> str:
        return "[1]" if self.rnumel is None else "[1, 1]"

    def note_contiguity(self, index) -> None:
        """Count loads whose address steps by one element with the innermost x or r variable
        (in 2-D kernels, loads that span both)."""
        expr = sympy.expand(sympy.sympify(index))
        symbols = sorted((s for s in expr.free_symbols if not is_size_symbol(s)), key=lambda s: s.name)
        xs = [s for s in symbols if s.name.startswith("x") and s.name not in self.indirect_dims]
        rs = [s for s in symbols if s.name.startswith("r") and s.name not in self.indirect_dims]
        if self.rnumel is not None and not (xs and rs):
            return  # (a row's or a column's vector: the same elements for every block, cached)
        if rs and expr.coeff(rs[-1]) == 1:
            self.loads_along["r"] += 1
        elif xs and expr.coeff(xs[-1]) == 1:
            self.loads_along["x"] += 1

    def _dims_of(self, expr) -> tuple[set[str], set[str]]:
        """The block dimensions an index spans: through x/r variables (its shape has them), and
        through data-dependent indices (it may: such a value's shape is not known here)."""
        names = {s.name for s in sympy.sympify(expr).free_symbols if not is_size_symbol(s)}
        indirect = set().union(*(self.indirect_dims.get(name, set()) for name in names))
        direct = {dim for dim in ("x", "r")
                  if any(name.startswith(dim) for name in names if name not in self.indirect_dims)}
        return direct, indirect

    def address(self, index, everywhere: bool = False) -> tuple[str, str]:
        """(index text, mask text) for a load, masked in the dimensions the index uses (in all of the
        scope's under ops.masked, and `everywhere` for a buffer that may be empty) and spread over
        every masked one, so that the pointer block has the mask's shape."""
        direct, indirect = self._dims_of(index)
        needed = direct | indirect | (set(self.dims) if self.conditions or everywhere else set())
        text = self.tex(index) + "".join(f" + 0 * {dim}index" for dim in sorted(needed - direct))
        if not needed and not direct:  # one element, as a [1] / [1, 1] block (never a 0-d value)
            text = f"{text} + tl.zeros({self.unit_shape}, tl.int32)"
        masks = [f"{dim}mask" for dim in ("x", "r") if dim in needed] + [f"({c})" for c in self.conditions]
        return text, " & ".join(masks)

    def store(self, node: ComputedBuffer, index, value: str) -> None:
        address = self.simplified(store_layout(node).index(index))
        direct, _ = self._dims_of(address)
        mask = " & ".join(f"{dim}mask" for dim in self.dims)
        if node.name not in self.internal:
            pointer, offset = on_pointer(f"out_ptr{self.outputs.index(node.name)}", address)
            text = self.tex(offset) + "".join(f" + 0 * {dim}index" for dim in self.dims if dim not in direct)
            self.scope.lines.append(f"tl.store({pointer} + {text}, {value}, {mask})")
        if node.dtype in _LOW_PRECISION:  # later readers in this kernel see the stored precision
            value = self.emit(f"{value}.to({TL_DTYPES[node.dtype]}).to(tl.float32)", torch.float32)
        self.scope.stored[(node.name, self.tex(address))] = value
        self.emitted.add(node.name)

    # -- generation -------------------------------------------------------------------------------
    def _begin(self, xranges: list, rnumel, persistent: bool, rlines: list[str] = (), order=None) -> None:
        """A kernel's scope and first lines: the block's x indices ([XBLOCK, 1] where it has rows,
        `rnumel`), `rlines`, then the x variables over `xranges` (walked in `order`)."""
        self.rnumel, self.persistent, self.xnumel = rnumel, persistent, product(xranges)
        self.kernel_scope = self.scope = Scope()
        self.dims: tuple[str, ...] = ("x",)  # the block dimensions of the group being generated
        self.ops = TritonOps(self)
        column = "" if rnumel is None else "[:, None]"
        head = [f"xoffset = tl.program_id(0).to({self.index_type}) * XBLOCK",
                f"xindex = xoffset + tl.arange(0, XBLOCK){column}.to({self.index_type})", "xmask = xindex < xnumel",
                *rlines]
        if order is None:
            self.xvars = _unflatten("x", "xindex", xranges, head, self)
        else:  # xindex walks the first output's memory in order (neighbouring lanes, neighbouring bytes)
            walked = _unflatten("x", "xindex", [xranges[d] for d in order], head, self)
            self.xvars = [walked[order.index(d)] for d in range(len(xranges))]
        self.kernel_scope.lines += head

    def generate(self, name: str) -> TritonSource:
        groups = Kernel(name, self.outer, self.nodes).groups()
        positions = {node.name: k for k, node in enumerate(self.nodes)}
        r_groups = [g for g in groups if g.reduction or g.inner]
        rnumel, rlines = None, []
        if r_groups:
            rnumel = product(r_groups[0].row_ranges())
            if any(sympy.expand(product(group.row_ranges()) - rnumel) != 0 for group in r_groups[1:]):
                raise ValueError("a Triton kernel over rows of several sizes (gpu_partition splits them first)")
        xranges = self.outer if r_groups else squeeze(self.nodes[0].data.ranges)
        persistent = rnumel is not None and sympy.sympify(rnumel).is_number and int(rnumel) <= PERSISTENT_RNUMEL
        if rnumel is not None:
            rlines.append(f"rbase = tl.arange(0, RBLOCK)[None, :].to({self.index_type})")
            if persistent:
                rlines += ["rindex = rbase", "rmask = rindex < rnumel"]
            if self.split:  # this program's chunk of the rows (RCHUNK: a multiple of RBLOCK)
                rlines += [f"rstart = tl.program_id(1).to({self.index_type}) * RCHUNK",
                           "rend = tl.minimum(rstart + RCHUNK, rnumel)"]
        order = _store_order(self.nodes[0], xranges) if rnumel is None else None
        self._begin(xranges, rnumel, persistent, rlines, order)
        self._rvars: dict[tuple, list] = {}
        try:
            self._runs(_shared_passes(groups, self.persistent), positions)
        except NotImplementedError:
            if self.unheld is None:  # (else its nodes go to another kernel, which meets it again if real)
                raise
        return self._finish(name)

    def _runs(self, runs: list, positions: dict) -> None:
        prologue = None
        for position, run in enumerate(runs):
            if self.unheld is not None:
                break
            group = run[0]
            self.position = positions[group.nodes[0].name]
            self.dims = ("x", "r") if group.reduction or group.inner else ("x",)
            if group.reduction:
                self._reductions(run, prologue)
                prologue = None
            elif group.inner and not self.persistent and position + 1 < len(runs) and \
                    _same_rows(group, runs[position + 1][0]):
                # (computed in the next reduction's loop: the reduction reads it from registers,
                # in one pass over the rows instead of a store, a split and a load)
                prologue = group
            elif group.inner:
                self._loop(group, lambda: self._pointwise(group))
            else:
                self._pointwise(group)

    def not_held(self, name: str) -> str:
        """A kernel-mate's value read where the kernel holds none of it: noted (the first one), and
        a stand-in of its type so that the node's text completes; no node after it is generated."""
        if self.unheld is None:
            self.unheld = (self.position, name, name in self.internal)
        dtype = self.buffer_dtypes.get(name, torch.float32)
        dtype = torch.float32 if dtype in _LOW_PRECISION else dtype
        return self.emit(f"tl.full({self.unit_shape}, 0, {TL_DTYPES[dtype]})", dtype)

    def generate_scatter(self, name: str, phase: str) -> TritonSource:
        """A Scatter node's two passes as two kernels, launched in order: "base" writes the
        input's values over the output's ranges; "update" writes (or, accumulating, atomically
        adds) each update at its data-dependent target.  Colliding plain writes land in an
        undefined order, as in eager's CUDA kernels; the fuzzer's scatters write each place once."""
        (node,) = self.nodes
        data = node.data
        ranges = data.out_ranges if phase == "base" else data.ranges
        self._begin(squeeze(ranges), None, False)
        index = loop_index(ranges, self.xvars)
        if phase == "base":
            self.store(node, index, data.base(self.ops, index))
            return self._finish(name)
        target = data.target(self.ops, index)
        value = data.inner_fn(self.ops, index)
        if data.accumulate and node.dtype not in (torch.float32, torch.float64, torch.int32, torch.int64):
            raise NotImplementedError(f"an accumulating scatter into {node.dtype} (no atomic add)")
        address = node.layout.index(target)
        direct, _ = self._dims_of(address)
        pointer, offset = on_pointer("out_ptr0", address)
        text = self.tex(offset) + ("" if "x" in direct else " + 0 * xindex")
        value = self.emit(f"{value}.to({TL_DTYPES[node.dtype]})")
        operation = "tl.atomic_add" if data.accumulate else "tl.store"
        self.scope.lines.append(f"{operation}({pointer} + {text}, {value}, xmask)")
        source = self._finish(name)
        source.tuning = "fixed"  # (atomic adds: a block's size changes which updates collide)
        if os.environ.get("TRITON_INTERPRET") == "1":
            # Triton's interpreter applies a block's atomic adds to one address once (numpy's
            # fancy-index +=), and a block's colliding stores last-wins: one update per program
            source.XBLOCK, source.num_warps = 1, 1
        return source

    def _combine_head(self, split: int, xranges: list, inputs: list[str]) -> None:
        """A combining kernel's start: one persistent block over the `split` partial results of
        each output (rows of the workspaces [split, xnumel], the kernel's `inputs`)."""
        self._begin(xranges, sympy.Integer(split), True,
                    [f"rindex = tl.arange(0, RBLOCK)[None, :].to({self.index_type})", "rmask = rindex < rnumel"])
        self.inputs += inputs
        self.dims = ("x", "r")

    def _combined(self, name: str, split: int) -> TritonSource:
        source = self._finish(name)
        source.XBLOCK, source.RBLOCK = max(1, min(64, 4096 // next_power_of_2(split))), next_power_of_2(split)
        source.tuning = "fixed"
        return source

    def _store_result(self, node: ComputedBuffer, result: str, acc_torch: torch.dtype) -> None:
        """A reduced value stored in its node's dtype (a bool as `!= 0`), one per row."""
        if node.dtype == torch.bool and acc_torch != torch.bool:
            result = self.emit(f"({result} != 0)", torch.bool)
        elif node.dtype != acc_torch:
            result = self.emit(f"{result}.to({TL_DTYPES[node.dtype]})", node.dtype)
        self.store(node, loop_index(node.data.ranges, self.xvars), result)

    def generate_combine(self, name: str, kind: str, acc_torch: torch.dtype, split: int, xranges: list) -> TritonSource:
        """A split reduction's second pass: each output's `split` partial results (a workspace
        [split, xnumel], the kernel's input) reduced and stored as the node stores its value."""
        (node,) = self.nodes
        self._combine_head(split, xranges, ["workspace"])
        partial = self.emit("tl.load(in_ptr0 + rindex * xnumel + xindex, xmask & rmask, other=0)", acc_torch)
        result = _Reducer(self, kind, TL_DTYPES[acc_torch], acc_torch).whole(partial)[kind]
        self.dims = ("x",)
        self._store_result(node, result, acc_torch)
        return self._combined(name, split)

    def generate_welford_combine(self, name: str, acc_torch: torch.dtype, split: int, xranges: list, rnumel: int,
                                 rchunk: int) -> TritonSource:
        """A split Welford's second pass: the chunks' means and m2s (workspaces [split, xnumel],
        inputs 0 and 1) combined exactly (Chan et al.: each chunk weighted by its count, known
        from its position), and both results stored."""
        mean_node, m2_node = self.nodes
        self._combine_head(split, xranges, ["workspace_mean", "workspace_m2"])
        acc = TL_DTYPES[acc_torch]
        means = self.emit("tl.load(in_ptr0 + rindex * xnumel + xindex, xmask & rmask, other=0)", acc_torch)
        m2s = self.emit("tl.load(in_ptr1 + rindex * xnumel + xindex, xmask & rmask, other=0)", acc_torch)
        counts = self.emit(f"tl.minimum(tl.maximum({rnumel} - rindex * {rchunk}, 0), {rchunk}).to({acc})", acc_torch)
        valid = self.emit(f"xmask & rmask & ({counts} > 0)", torch.bool)
        total = self.emit(f"tl.sum(tl.where({valid}, {counts} * {means}, 0), 1)[:, None]", acc_torch)
        # eager's Welford: an infinity meeting another value makes the mean NaN (inf - inf)
        infinite = self.emit(f"tl.max(tl.where({valid}, (tl.abs({means}) == float('inf')).to(tl.int8), 0), 1)"
                             f"[:, None]", torch.int8)
        mean = self.emit(f"tl.where(({infinite} != 0) & ({rnumel} > 1), float('nan'), "
                         f"{_exact_quotient(total, str(rnumel), acc_torch)})", acc_torch)
        deviation = self.emit(f"tl.where({valid}, {means} - {mean}, 0)", acc_torch)
        m2 = self.emit(f"tl.sum(tl.where({valid}, {m2s} + {counts} * {deviation} * {deviation}, 0), 1)[:, None]",
                       acc_torch)
        self.dims = ("x",)
        for node, result in ((mean_node, mean), (m2_node, m2)):
            self._store_result(node, result, acc_torch)
        return self._combined(name, split)

    def _rvars_for(self, ranges: list) -> list:
        """Index variables over `ranges` from rindex, defined in the current scope (once per
        scope and ranges: equal ranges share variables, so their values match in registers)."""
        key = (self.scope.serial, tuple(ranges))
        if key not in self._rvars:
            lines: list[str] = []
            self._rvars[key] = _unflatten(f"r{len(self._rvars)}_", "rindex", ranges, lines, self)
            self.scope.lines += lines
        return self._rvars[key]

    def _loop(self, group: LoopGroup, body: Callable[[], None]) -> None:
        if self.persistent:
            body()
            return
        outer_scope = self.scope
        self.scope = Scope(outer_scope)
        self.scope.lines += ["rindex = roffset + rbase", "rmask = rindex < rnumel"]
        try:
            body()
        finally:
            loop, self.scope = self.scope, outer_scope
        outer_scope.lines.append("for roffset in range(rstart, rend, RBLOCK):" if self.split else
                                 "for roffset in range(0, rnumel, RBLOCK):")
        outer_scope.lines += ["    " + line for line in loop.lines]

    def _pointwise(self, group: LoopGroup) -> None:
        inner_vars = self._rvars_for(list(group.inner)) if group.inner else []
        for node in group.nodes:
            if self.unheld is not None:
                return
            self.position = self.nodes.index(node)
            index = loop_index(node.data.ranges, [*self.xvars, *inner_vars])
            value = node.data.inner_fn(self.ops, index)
            self.store(node, index, value)

    def _reductions(self, groups: list[LoopGroup], prologue: LoopGroup | None = None) -> None:
        """Reductions over the same rows in one pass (one loop: each element loaded once for
        all of them), after the pointwise nodes of `prologue` (over the same rows) in that loop."""
        states = []
        for group in groups:
            node = group.nodes[0]
            if node.name in self.emitted:  # a Welford partner, stored with its mate
                continue
            data: Reduction = node.data
            kind = data.spec.reduction_type
            acc_torch = torch.bool if kind in ("any", "all") else \
                torch.float32 if data.spec.src_dtype in _LOW_PRECISION else data.spec.src_dtype
            states.append({"node": node, "kind": kind, "acc": acc_torch, "index": loop_index(node.data.ranges, self.xvars),
                           "reduce": _Reducer(self, kind, TL_DTYPES[acc_torch], acc_torch)})
        if not states:
            if prologue is not None:
                self._loop(prologue, lambda: self._pointwise(prologue))
            return
        outer_scope = self.scope

        def body():
            if prologue is not None:
                self._pointwise(prologue)
                self.position = self.nodes.index(states[0]["node"])
            for state in states:
                ranges = list(state["node"].data.spec.reduction_ranges)
                rindex = loop_index(ranges, self._rvars_for(squeeze(ranges)))
                value = state["node"].data.inner_fn(self.ops, state["index"], rindex)
                if self.persistent:
                    state["results"] = state["reduce"].whole(value)
                else:
                    state["reduce"].update(value)

        if not self.persistent:
            for state in states:
                state["reduce"].init(outer_scope)
        self._loop(groups[0], body)
        for state in states:
            self._store_reduced(state)

    def _store_reduced(self, state: dict) -> None:
        node, kind, acc_torch = state["node"], state["kind"], state["acc"]
        results = state["results"] if self.persistent else state["reduce"].finish()
        for result in results.values():
            self.value_dtypes[result] = torch.bool if kind in ("any", "all") else \
                torch.int64 if kind in ("argmax", "argmin") else acc_torch
        self.dims = ("x",)  # results: one per row
        members = [node]
        if kind in ("welford_mean", "welford_m2") and node.data.partner:
            members = [n for n in self.nodes if n.name in node.data.partner and n.name not in self.emitted]
        for member in members:
            result = results[member.data.spec.reduction_type] if kind.startswith("welford") else results[kind]
            if self.split:  # this chunk's partial result, in the accumulator's dtype
                slot = len(self.partials)
                self.partials.append((member, kind, acc_torch))
                self.scope.lines.append(f"tl.store(ws_ptr{slot} + tl.program_id(1) * xnumel + xindex, {result}, xmask)")
                self.emitted.add(member.name)
                continue
            self._store_result(member, result, acc_torch)

    def _finish(self, name: str) -> TritonSource:
        symbols = sorted(self.size_symbols | {s.name for e in (self.xnumel, self.rnumel or 0)
                                              for s in sympy.sympify(e).free_symbols if is_size_symbol(s)})
        outputs = [] if self.split else [f"out_ptr{k}" for k in range(len(self.outputs))]
        parameters = [f"in_ptr{k}" for k in range(len(self.inputs))] + outputs + \
            [f"ws_ptr{k}" for k in range(len(self.partials))] + ["xnumel"] + \
            (["rnumel"] if self.rnumel is not None else []) + symbols + \
            (["oob_ptr"] if self.index_checks else []) + ["XBLOCK: tl.constexpr"] + \
            (["RBLOCK: tl.constexpr"] if self.rnumel is not None else []) + \
            (["RCHUNK: tl.constexpr"] if self.split else [])
        lines = [f"# {node.name}: {provenance(node)}" for node in self.nodes]
        lines += ["@triton.jit", f"def {name}({', '.join(parameters)}):"]
        lines += ["    " + line for line in self.kernel_scope.lines]
        columns = self.loads_along["x"] > 0 and self.loads_along["r"] == 0
        xblock, rblock, warps = _launch(self.xnumel, self.rnumel, self.persistent, columns)
        self.columns = columns
        tuning = "flat" if self.rnumel is None else ("columns" if columns else "rows") + \
            ("_persistent" if self.persistent else "")
        return TritonSource(name, "\n".join(lines) + "\n", list(self.inputs),
                            [] if self.split else list(self.outputs), symbols,
                            self.xnumel, self.rnumel, xblock, rblock, warps, list(self.index_checks), tuning=tuning,
                            elided=sorted(self.internal), unheld=self.unheld)


def _unflatten(prefix: str, flat: str, ranges: list, lines: list[str], kernel: TritonKernel) -> list:
    """Variables prefix0.. over `ranges` (row-major) from the flat index `flat`, defined in `lines`
    (over ranges holding a 0 there is no element: every variable is 0)."""
    variables = [sympy.Symbol(f"{prefix}{k}", integer=True, nonnegative=True) for k in range(len(ranges))]
    if any(sympy.sympify(size).is_zero for size in ranges):
        lines += [f"{var.name} = 0 * {flat}" for var in variables]
        return variables
    stride = sympy.Integer(1)
    definitions = []
    for position in range(len(ranges) - 1, -1, -1):
        var, size = variables[position], ranges[position]
        kernel.bounds[var] = sympy.sympify(size) - 1
        part = flat if stride == 1 else f"({flat} // {kernel.tex(stride)})"
        definitions.append(f"{var.name} = {part}" + ("" if position == 0 else f" % {kernel.tex(size)}"))
        stride = stride * size
    lines += reversed(definitions)
    return variables


def _shared_passes(groups: list[LoopGroup], persistent: bool) -> list[list[LoopGroup]]:
    """The kernel's loop groups, with neighbouring reductions over the same rows that do not read
    each other's results joined into one run (one pass over the rows: a layer norm's weight and
    bias gradients read the same inputs once).  Persistent kernels keep one group per run: their
    values stay in registers anyway."""
    from ...lowering.analysis import record

    runs: list[list[LoopGroup]] = []
    for group in groups:
        last = runs[-1] if runs else None
        if not persistent and last is not None and group.reduction and last[0].reduction and \
                len(group.nodes) == 1 and _plain_reduction(group.nodes[0]) and \
                all(_plain_reduction(g.nodes[0]) for g in last) and \
                list(group.nodes[0].data.spec.reduction_ranges) == list(last[0].nodes[0].data.spec.reduction_ranges):
            reads = {name for name, _ in record(group.nodes[0].data).loads}
            if not reads & {g.nodes[0].name for g in last}:
                last.append(group)
                continue
        runs.append([group])
    return runs


def _same_rows(pointwise: LoopGroup, reduction: LoopGroup) -> bool:
    """Does a pointwise group walk the rows exactly as a reduction group reduces them (same
    inner ranges, hence the same r variables)?"""
    return reduction.reduction and list(pointwise.inner) == squeeze(
        list(reduction.nodes[0].data.spec.reduction_ranges))


def _plain_reduction(node: ComputedBuffer) -> bool:
    return isinstance(node.data, Reduction) and node.data.spec.reduction_type in _BLOCK_REDUCE


def _store_order(node: ComputedBuffer, xranges: list) -> list | None:
    """The dimensions of a pointwise kernel's range from largest to smallest stride of its first
    output, when that is not their logical order (an output laid out transposed); None otherwise."""
    from ...lowering.ir import Layout

    layout, ranges = store_layout(node), list(node.data.ranges)
    if not isinstance(layout, Layout) or len(layout.stride) != len(ranges):
        return None
    strides = [sympy.sympify(stride) for stride, size in zip(layout.stride, ranges) if size != 1]
    if len(strides) != len(xranges) or not all(stride.is_number for stride in strides):
        return None
    order = sorted(range(len(strides)), key=lambda k: -int(strides[k]))
    return order if order != list(range(len(strides))) else None


# Defaults measured on an H100 (ViT-B and BERT training): persistent rows of 768 ran fastest one row
# per block with 4 warps; pointwise kernels of 2^24 elements or more at XBLOCK 2048 with 8 warps.
LARGE_FLAT = 1 << 24


def _launch(xnumel, rnumel, persistent: bool, columns: bool = False) -> tuple[int, int | None, int]:
    """Block sizes and warps before autotuning (tune.py may change them).
    `columns`: the loads walk memory along x, not along r (a bias gradient's sum over rows):
    a block spans several outputs, so that neighbouring threads read neighbouring elements."""
    xnumel = sympy.sympify(xnumel)
    xcap = next_power_of_2(int(xnumel)) if xnumel.is_number else 1 << 20
    if rnumel is not None and columns:
        if persistent:
            rblock = next_power_of_2(max(int(rnumel), 1))
            xblock = max(1, min(32, xcap, 4096 // rblock))
            return xblock, rblock, 8 if xblock * rblock >= 4096 else 4
        # Looped: 64 outputs (128-256 contiguous bytes a row) by 32 rows; the rows are split into
        # chunks (gpu_partition.split_count) so that enough programs stream at once.
        return max(1, min(64 if xcap >= 256 else 32, xcap)), 32, 4
    if rnumel is None:
        if xnumel.is_number and int(xnumel) >= LARGE_FLAT:
            return 2048, None, 8
        block = max(16, min(1024, xcap))
        return block, None, 4 if block >= 512 else 2 if block >= 128 else 1
    if persistent:
        rblock = next_power_of_2(max(int(rnumel), 1))
        if rblock >= 1024:  # one row per block
            return 1, rblock, 4 if rblock <= 1024 else 8
        xblock = max(1, min(64, 4096 // rblock, xcap))
        return xblock, rblock, 8 if xblock * rblock >= 4096 else 4
    return 1, 2048, 8

