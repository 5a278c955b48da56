"""pallas_call: a kernel body, a grid and block specs made into a function on tpu tensors. The
body is traced once per input shapes and dtypes (tracing.py) and lowered by the chip's generator
(vtpu._C.block_kernel_source); in defer_and_fuse the kernel is recorded as a node of the pending
graph (vtpu._C.record_user_kernel), otherwise it runs at once through run_assembly.
The function is a torch custom op (`vtpu_kernels::<name>`) with a fake implementation, so
torch.compile(backend="tpu") sees one node, and autograd calls the `backward` given.
"""
from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from .. import _C
from ..assembly import run_assembly
from .array_blocks import as_flat, block_of, cut_to, flat_row_index, flat_shape, last_two, pad_to, whole_blocks
from .copies import ANY, Semaphore, SemaphoreType
from .grid import RangeCheck, trace_index_map
from .scalar_prefetch import PrefetchScalarGridSpec, ScalarTable, check_tables
from .tracing import KernelTraceError, Tracer, dtype_code, tracing

_LIBRARY = torch.library.Library("vtpu_kernels", "FRAGMENT")
_names = itertools.count()


@dataclass(frozen=True)
class BlockSpec:
    """Which block of an array a grid step sees: `block_shape`, and `index_map(*program_ids)`
    giving the block's index along each dim (element offset = index * block size). Arrays of
    more than 2 dims give None (squeezed) for all but the last two (array_blocks.py).
    `memory_space=pl.ANY` leaves the array in HBM for the body's own copies (copies.py)."""
    block_shape: tuple[int | None, ...] | None = None
    index_map: Callable[..., tuple] | None = None
    memory_space: str | None = None


@dataclass(frozen=True)
class ShapeDtype:
    """An output's shape and dtype (JAX's ShapeDtypeStruct)."""
    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32


@dataclass(frozen=True)
class VMEM:
    """A scratch buffer in VMEM, kept across grid steps (an accumulator)."""
    shape: tuple[int, int]
    dtype: torch.dtype = torch.float32


def _where(fn) -> str:
    code = getattr(fn, "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code else repr(fn)


@dataclass
class Kernel:
    body: Callable
    out_shape: tuple[ShapeDtype, ...]
    grid: tuple[int, ...]
    in_specs: Sequence[BlockSpec | None]
    out_specs: tuple[BlockSpec | None, ...]
    scratch_shapes: Sequence[VMEM | str]
    name: str
    chip: str = ""
    num_tables: int = 0
    sources: dict = field(default_factory=dict)

    def _ref(self, t: Tracer, kind: str, shape, dtype, spec: BlockSpec | None, what: str, tables: tuple = ()):
        if len(shape) < 2:
            raise KernelTraceError(f"kernel '{self.name}': {what} has shape {tuple(shape)}; kernels take arrays of 2 "
                                   "dims or more")
        if spec is not None and spec.memory_space == ANY:
            if len(shape) != 2:
                raise KernelTraceError(f"kernel '{self.name}': {what} of shape {tuple(shape)} is left in HBM "
                                       "(memory_space=pl.ANY): copy windows take 2-D arrays")
            return t.add_ref(kind, dtype, shape, shape, in_hbm=True)
        if spec is None or spec.block_shape is None:  # the whole array as one block
            if len(shape) != 2:
                raise KernelTraceError(f"kernel '{self.name}': {what} of shape {tuple(shape)} needs a BlockSpec: the "
                                       "body sees 2-D blocks, the leading dims' block sizes None (squeezed)")
            spec = BlockSpec(tuple(shape), lambda *ids: (0, 0))
        block = block_of(spec.block_shape, shape, f"kernel '{self.name}': {what}")
        if any(b <= 0 or s % b for s, b in zip(shape[-2:], block)):
            raise KernelTraceError(f"kernel '{self.name}': {what} of shape {tuple(shape)} is not a whole number of "
                                   f"{block} blocks")
        index = trace_index_map(spec.index_map, self.grid, f"kernel '{self.name}': {what}", tables, len(shape))
        blocks = (*shape[:-2], shape[-2] // block[0], shape[-1] // block[1])

        def message(point, starts) -> str:
            return (f"kernel '{self.name}': {what}'s index map sends grid index {point} to block {starts}, outside the "
                    f"{' x '.join(map(str, blocks))} blocks of its array (index map at {_where(spec.index_map)})")

        t.check(RangeCheck(index, (1,) * len(shape), blocks, message))
        return t.add_ref(kind, dtype, flat_shape(shape), block, [flat_row_index(index, blocks).spec(), index[-1].spec()])

    def _padded_outputs(self) -> tuple[ShapeDtype, ...]:
        return tuple(ShapeDtype(whole_blocks(o.shape, last_two(s)), o.dtype) for o, s in zip(self.out_shape, self.out_specs))

    def _padded_inputs(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Scalar-prefetch tables as they are, then each input padded to whole blocks."""
        tables, arrays = list(inputs[:self.num_tables]), inputs[self.num_tables:]
        specs = list(self.in_specs or ()) + [None] * max(0, len(arrays) - len(self.in_specs or ()))
        return tables + [pad_to(x, whole_blocks(x.shape, last_two(s))) for x, s in zip(arrays, specs)]

    def trace(self, inputs: Sequence[torch.Tensor]) -> tuple[dict, list]:
        """The spec the generator takes, and the range checks left for each call."""
        lengths = check_tables(inputs, self.num_tables, self.name)
        inputs = inputs[self.num_tables:]
        if len(inputs) != len(self.in_specs):
            raise KernelTraceError(f"kernel '{self.name}' has {len(self.in_specs)} in_specs, was given {len(inputs)} tensors")
        t = Tracer(self.name, self.grid)
        with tracing(t):
            tables = tuple(ScalarTable(i, n, len(self.grid)) for i, n in enumerate(lengths))
            refs: list = list(tables)
            refs += [self._ref(t, "input", x.shape, x.dtype, s, f"input {i}", tables)
                     for i, (x, s) in enumerate(zip(inputs, self.in_specs))]
            refs += [self._ref(t, "output", o.shape, o.dtype, s, f"output {i}", tables)
                     for i, (o, s) in enumerate(zip(self._padded_outputs(), self.out_specs))]
            for v in self.scratch_shapes:
                if v == SemaphoreType.DMA:
                    refs.append(Semaphore(t.semaphores))
                    t.semaphores += 1
                    continue
                dtype_code(v.dtype, "a scratch buffer")
                refs.append(t.add_ref("scratch", v.dtype, v.shape, v.shape))
            self.body(*refs)
        spec = {"name": self.name, "grid": list(self.grid), "refs": t.refs, "body": _fuse_dots(t.body, t.refs),
                "semaphores": t.semaphores, "tables": lengths}
        return spec, [c for c in t.checks if c.reads_tables()]

    def source(self, inputs: Sequence[torch.Tensor]) -> str:
        """The kernel's vtpu assembly for these inputs' shapes and dtypes (traced once each)."""
        return self._generated(self._padded_inputs(inputs))[0]

    def _generated(self, inputs: Sequence[torch.Tensor], packed: bool = False) -> tuple[str, list]:
        """(assembly, checks of table-dependent indices), generated once per shapes and dtypes (and
        with the outputs `packed` into one buffer, or not); the body's line of each instruction is
        noted beside the source, for its errors' messages."""
        key = (tuple((tuple(x.shape), x.dtype) for x in inputs), packed)
        if key not in self.sources:
            spec, checks = self.trace(inputs)
            spec["packed_outputs"] = packed
            device = inputs[0].device.index or 0 if inputs else 0
            source = _C.block_kernel_source(spec, self.chip, device)
            _C.note_user_kernel(source, self.name, _instruction_lines(source, spec["body"]), list(self.grid))
            self.sources[key] = (source, checks)
        return self.sources[key]

    def run(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        for i, x in enumerate(inputs):
            if x.device.type != "tpu":
                raise ValueError(f"kernel '{self.name}': input {i} is on {x.device}; kernels read tpu tensors")
        inputs = self._padded_inputs(inputs)
        outputs = self._run_whole_blocks(inputs)
        return [cut_to(y.reshape(p.shape), o.shape) for y, p, o in zip(outputs, self._padded_outputs(), self.out_shape)]

    def _run_whole_blocks(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The outputs flattened to 2-D, as the chip writes them (array_blocks.py)."""
        source, checks = self._generated(inputs)
        if checks:  # block indices that read scalar-prefetch tables: checked with this call's values
            values = [t.cpu().tolist() for t in inputs[:self.num_tables]]
            for check in checks:
                check.run(self.grid, values)
        flat_outputs = [ShapeDtype(flat_shape(o.shape), o.dtype) for o in self._padded_outputs()]
        if inputs and _C.get_mode() == "defer_and_fuse":
            return self._record(inputs, flat_outputs)
        outputs = _empty_outputs(flat_outputs, inputs)
        try:
            run_assembly(source, *[as_flat(x) for x in inputs], *outputs)
        except RuntimeError as error:
            raise RuntimeError(f"{error}\n{_C.user_kernel_failure_note(source, str(error))}") from None
        return outputs

    def _record(self, inputs: Sequence[torch.Tensor], outputs: list[ShapeDtype]) -> list[torch.Tensor]:
        """The kernel as one more node of the pending graph: pending work stays pending, and the
        kernel runs in order at the next flush (its errors surface there, naming the body's line).
        A node has one value: several outputs are written one after another into it, and each is
        a part of it (int32 words viewed as its dtype, when the outputs' dtypes differ)."""
        source, _ = self._generated(inputs, packed=len(outputs) > 1)
        word = outputs[0].dtype if len({o.dtype for o in outputs}) == 1 else torch.int32
        sizes = [math.prod(o.shape) * o.dtype.itemsize // word.itemsize for o in outputs]  # (whole 128-lane rows)
        value = _C.record_user_kernel(source, [as_flat(x) for x in inputs], [sum(sizes)], word)
        starts = itertools.accumulate(sizes, initial=0)
        return [value[start:start + size].view(o.dtype).view(o.shape) for start, size, o in zip(starts, sizes, outputs)]


def _instruction_lines(source: str, body: list[dict]) -> list[str]:
    """For each instruction of `source`, the body line of the statement it belongs to ('' for the
    grid loop and pipeline), from the generator's `; statement k` comments."""
    lines: list[str] = []
    current = ""
    for text in source.splitlines():
        stripped = text.strip()
        marker = re.match(r";\s*statement (\d+)", stripped)
        if marker:
            current = body[int(marker.group(1))].get("line", "")
            continue
        if stripped.startswith("; end of statement"):
            current = ""
        code = re.split(r";|#|//", stripped, maxsplit=1)[0].strip()
        if code and not code.endswith(":") and not code.startswith("."):
            lines.append(current)
    return lines


def _fuse_dots(body: list[dict], refs: list[dict]) -> list[dict]:
    """`o[...] = dot(a, b)` and `o[...] += dot(a, b)` as one dot into o (accumulating in the
    MXU's f32 result buffers) rather than a dot into a temporary and a copy or add."""
    out: list[dict] = []
    for st in body:
        prev = out[-1] if out else None
        if (prev and prev["kind"] == "dot" and not prev["accumulate"] and st["kind"] == "assign" and prev["when"] == st["when"]
                and refs[prev["target"]]["kind"] == "scratch" and _read_once(body, prev["target"])
                and refs[st["target"]]["block"] == refs[prev["target"]]["block"]):
            temp, target = prev["target"], st["target"]
            nodes = st["nodes"]
            loads = {i: st["operands"][n[1]] for i, n in enumerate(nodes) if n[0] == "input"}
            out_node = nodes[st["output"]]
            if out_node[0] == "input" and loads[st["output"]] == temp:
                out[-1] = dict(prev, target=target)
                continue
            if (out_node[:2] == ("binary", "add") and sorted(loads.get(k) for k in out_node[2:]) == sorted([temp, target])
                    and len(nodes) == 3):
                out[-1] = dict(prev, target=target, accumulate=True)
                continue
        out.append(st)
    used = {st["target"] for st in out} | {i for st in out for i in st["operands"]}
    for i, r in enumerate(refs):  # a temporary no statement touches any more takes no VMEM
        if r["kind"] == "scratch" and i not in used:
            r["block"] = [8, 128]
            r["shape"] = [8, 128]
    return out


def _read_once(body: list[dict], ref: int) -> bool:
    return sum(st["operands"].count(ref) for st in body) == 1


def pallas_call(kernel: Callable, out_shape, *, grid: tuple[int, ...] | int = (), in_specs=None, out_specs=None,
                scratch_shapes: Sequence[VMEM] = (), name: str | None = None, backward: Callable | None = None,
                chip: str = "", num_scalar_prefetch: int = 0, grid_spec: PrefetchScalarGridSpec | None = None) -> Callable:
    """A function running `kernel` on tpu tensors at every point of `grid` (Pallas's pallas_call).
    `backward(inputs, outputs, grad_outputs)`, if given, returns the inputs' gradients (any tpu
    code, other kernels included). `chip` names a preset to generate for instead of the device's.
    The first `num_scalar_prefetch` inputs are int32 tables (scalar_prefetch.py)."""
    if grid_spec is not None:
        num_scalar_prefetch, grid, in_specs = grid_spec.num_scalar_prefetch, grid_spec.grid, grid_spec.in_specs
        out_specs, scratch_shapes = grid_spec.out_specs, grid_spec.scratch_shapes
    outs = _outputs(out_shape)
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    if out_specs is None or isinstance(out_specs, BlockSpec):
        out_specs = (out_specs,) * len(outs)
    name = name or getattr(kernel, "__name__", "kernel")
    k = Kernel(kernel, outs, grid, in_specs, tuple(out_specs), scratch_shapes, name, chip, num_scalar_prefetch)
    call = _custom_op(name, lambda inputs: k.run(inputs), outs, isinstance(out_shape, ShapeDtype), backward)
    call.kernel = k  # type: ignore[attr-defined]
    call.source = k.source  # type: ignore[attr-defined]
    return call


def assembly_call(source: str, out_shape, *, scalars: Sequence[int] = (), defines: dict[str, int] | None = None,
                  name: str | None = None, backward: Callable | None = None) -> Callable:
    """A kernel written in vtpu assembly (vtpu.run_assembly's) as the same kind of custom op: its
    `.arg`s are the inputs, then the outputs (allocated here), then `scalars`."""
    outs = _outputs(out_shape)

    def run(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        outputs = _empty_outputs(outs, inputs)
        run_assembly(source, *[x.contiguous() for x in inputs], *outputs, *scalars, defines=defines)
        return outputs

    found = re.search(r"^\s*\.name\s+(\w+)", source, re.M)
    return _custom_op(name or (found.group(1) if found else "assembly"), run, outs, isinstance(out_shape, ShapeDtype),
                      backward)


def _outputs(out_shape) -> tuple[ShapeDtype, ...]:
    return (out_shape,) if isinstance(out_shape, ShapeDtype) else tuple(out_shape)


def _empty_outputs(outs: Sequence[ShapeDtype], inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The kernel's outputs, on its inputs' device (real tensors, or fake ones while compiling)."""
    device = inputs[0].device if inputs else torch.device("tpu")
    return [torch.empty(o.shape, dtype=o.dtype, device=device) for o in outs]


def _custom_op(name: str, run: Callable, outs: tuple[ShapeDtype, ...], single: bool, backward: Callable | None):
    """`run` registered as torch.ops.vtpu_kernels.<name>_<n>(Tensor[]) -> Tensor[] for tpu tensors,
    with a fake implementation (shapes for torch.compile) and `backward` as its autograd formula."""
    op_name = f"{name.strip('_') or 'kernel'}_{next(_names)}"
    _LIBRARY.define(f"{op_name}(Tensor[] inputs) -> Tensor[]")
    qualname = f"vtpu_kernels::{op_name}"
    _LIBRARY.impl(op_name, lambda inputs: run(list(inputs)), "PrivateUse1")

    @torch.library.register_fake(qualname)
    def _fake(inputs):
        return _empty_outputs(outs, inputs)

    if backward is not None:
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(*inputs[0], *output)
            ctx.count = len(inputs[0])

        def _backward(ctx, grads):
            saved = ctx.saved_tensors
            result = backward(list(saved[:ctx.count]), list(saved[ctx.count:]), list(grads))
            return (list(result) if isinstance(result, (list, tuple)) else [result],)

        torch.library.register_autograd(qualname, _backward, setup_context=setup_context)
    op = getattr(torch.ops.vtpu_kernels, op_name)

    def call(*inputs: torch.Tensor):
        results = op(list(inputs))
        return results[0] if single else tuple(results)

    call.op = op  # type: ignore[attr-defined]
    call.__name__ = name
    return call
