"""The torch.distributed backend "tpu_dist": one rank per simulated chip, each rank a process.

Data moves between the ranks through Gloo on the host (sound and simple): a collective copies its
tpu tensors to the host, runs Gloo's collective there and copies the results back. What the
chips would spend on it is the simulator's interconnect model (interconnect.py), on a timeline
beside compute: each chip's interconnect runs its collectives one after another, a collective
starts when the last rank is ready (its inputs computed, its interconnect free) and ends its
kernel's simulated time later, the same end on every rank. Its results are in flight until
then: the chip computes on, and whatever reads them first (a kernel, the host) waits for them,
as does `work.wait()` (a synchronous collective's too), the way a CUDA stream waits for NCCL's.
On the host every collective is synchronous but sends and receives, so rings of
batch_isend_irecv do not deadlock.

CPU tensors go to Gloo as they are, untimed, so one group serves `tpu` and `cpu` tensors.
"""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (AllgatherOptions, AllreduceOptions, AllToAllOptions, BarrierOptions,
                                        BroadcastOptions, ReduceOp, ReduceScatterOptions)

from .. import _C
from . import interconnect
from .in_flight import InFlight, P2PWork, interconnect_free_at
from .collective_stats import record

_LOOPBACK = "127.0.0.1"
# The collective kernel each timed call runs as (interconnect.py), for the trace's link rows.
_KERNELS = {"all_reduce": "all_reduce", "reduce": "all_reduce", "reduce_scatter": "reduce_scatter",
            "all_gather": "all_gather", "gather": "gather", "scatter": "scatter", "all_to_all": "all_to_all",
            "broadcast": "broadcast"}


class _Staged:
    """A collective's tensors on the host: tpu tensors copied out (contiguous, as Gloo needs)
    and, for those the collective writes, copied back by `finish`; CPU tensors used as they are."""

    def __init__(self):
        self.device: int | None = None
        self._back: list[tuple[torch.Tensor, torch.Tensor | None]] = []

    @property
    def written(self) -> list[torch.Tensor]:
        return [t for t, _ in self._back]

    def written_directly(self, t: torch.Tensor) -> None:
        """`t` gets the collective's results by other means, but arrives with them."""
        if t.device.type == "tpu":
            self.device = t.device.index or 0
            self._back.append((t, None))

    def __call__(self, t: torch.Tensor, written: bool = True) -> torch.Tensor:
        if t.device.type != "tpu":
            return t
        if self.device is None:
            self.device = t.device.index or 0
        host = t.detach().to("cpu").contiguous()
        if written:
            self._back.append((t, host))
        return host

    def finish(self) -> None:
        with torch.no_grad():
            for t, host in self._back:
                if host is not None:
                    t.copy_(host)


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _is_premul(op) -> bool:
    return getattr(op, "op", op) == ReduceOp.RedOpType.PREMUL_SUM


def _premultiplied(op, tensors: list[torch.Tensor]) -> ReduceOp | ReduceOp.RedOpType:
    """Gloo has no PREMUL_SUM (FSDP2 asks for it with a gradient divide factor): `tensors` (which
    the reduction overwrites, or private copies) are multiplied first, then summed."""
    if not _is_premul(op):
        return op
    factor = op.factor
    with torch.no_grad():
        for t in tensors:
            t.mul_(factor)
    return ReduceOp.SUM


class ProcessGroupTPU(dist.ProcessGroup):
    def __init__(self, store, rank: int, size: int, timeout: datetime.timedelta):
        super().__init__(rank, size)
        options = dist.ProcessGroupGloo._Options()
        options._timeout = timeout
        options._devices = [dist.ProcessGroupGloo.create_device(hostname=_LOOPBACK)]
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("tpu_dist/gloo", store), rank, size, options)
        world = dist.get_world_size() if dist.is_initialized() else size
        self.interconnect = interconnect.for_group(world, size)

    def getBackendName(self) -> str:
        return "tpu_dist"

    # The base class keeps a group's name in its backends, which a Python group has none of;
    # DeviceMesh and the functional collectives look groups up by it.
    def setGroupName(self, name: str) -> None:
        self._group_name = name

    @property
    def group_name(self) -> str:
        return self._group_name

    def setGroupDesc(self, desc: str) -> None:
        self._group_desc = desc

    @property
    def group_desc(self) -> str:
        return getattr(self, "_group_desc", "")

    def __repr__(self) -> str:
        return f"ProcessGroupTPU(rank={self.rank()}, size={self.size()}, {self.interconnect!r})"

    # --- simulated time ------------------------------------------------------------------------
    def _schedule(self, staged: _Staged, name: str, nbytes: int, seconds: float, root: int = 0) -> float | None:
        """The collective's end on the simulated timeline: the latest rank's start plus `seconds`.
        Its written tpu tensors arrive then; None for CPU tensors (untimed). Every rank takes part
        in the exchange of starts whatever its tensors' device, so ranks that differ cannot hang.
        `root`: a scatter's or gather's, for the links its kernel used."""
        device = staged.device
        ready = 0.0 if device is None else max(_C.simulated_clock(device), interconnect_free_at.get(device, 0.0))
        starts = torch.tensor([ready], dtype=torch.float64)
        self._gloo.allreduce([starts], self._max()).wait()
        if device is None:
            return None
        start = float(starts.item())
        end = start + seconds
        interconnect_free_at[device] = end
        _C.trace_interconnect(device, name, start, end)
        if name in _KERNELS and _C.tracing():  # one row per link leaving this chip, as the kernel used it
            for link, busy in self.interconnect.links(_KERNELS[name], nbytes, self.rank(), src=root, dst=root):
                for begin, finish in busy:
                    _C.trace_interconnect(device, f"{name} (link)", start + begin, start + finish, row=link)
        for t in staged.written:
            _C.set_arrival(t, end)
        record(name, nbytes, seconds)
        return end

    @staticmethod
    def _max() -> AllreduceOptions:
        opts = AllreduceOptions()
        opts.reduceOp = ReduceOp.MAX
        return opts

    def _run(self, name: str, staged: _Staged, work: dist.Work, result, nbytes: int, seconds: float,
             root: int = 0) -> dist.Work:
        work.wait()
        staged.finish()
        return InFlight(result, staged.device, self._schedule(staged, name, nbytes, seconds, root))

    # --- reductions ------------------------------------------------------------------------------
    def allreduce(self, tensors, opts=AllreduceOptions()):
        staged = _Staged()
        host = [staged(t) for t in tensors]
        opts.reduceOp = _premultiplied(opts.reduceOp, host)
        return self._run("all_reduce", staged, self._gloo.allreduce(host, opts), tensors, _nbytes(tensors),
                         self.interconnect.all_reduce(_nbytes(tensors)))

    def allreduce_coalesced(self, tensors, opts=None):
        # one all-reduce of every tensor, each charged as part of one flat buffer
        single = AllreduceOptions()
        if opts is not None:
            single.reduceOp = opts.reduceOp
        return InFlight.together([self.allreduce([t], single) for t in tensors], tensors)

    def reduce(self, tensors, opts):
        staged = _Staged()
        host = [staged(t) for t in tensors]
        # a reduce-scatter, then a gather of the shares to the root: an all-reduce's time
        return self._run("reduce", staged, self._gloo.reduce(host, opts), tensors, _nbytes(tensors),
                         self.interconnect.all_reduce(_nbytes(tensors)))

    def reduce_scatter(self, output_tensors, input_lists, opts=ReduceScatterOptions()):
        staged = _Staged()
        out = [staged(t) for t in output_tensors]
        ins = [[staged(t, written=False) for t in row] for row in input_lists]
        if _is_premul(opts.reduceOp):  # the inputs are not the outputs: scale copies of them
            ins = [[t.clone() if t.device.type == "cpu" and staged.device is None else t for t in row] for row in ins]
            opts.reduceOp = _premultiplied(opts.reduceOp, [t for row in ins for t in row])
        nbytes = sum(_nbytes(row) for row in input_lists)
        return self._run("reduce_scatter", staged, self._gloo.reduce_scatter(out, ins, opts), output_tensors, nbytes,
                         self.interconnect.reduce_scatter(nbytes))

    def reduce_scatter_single(self, output, input, opts=ReduceScatterOptions()):
        return self.reduce_scatter([output], [list(torch.chunk(input, self.size()))], opts)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=ReduceScatterOptions()):
        return InFlight.together([self.reduce_scatter_single(o, i, opts) for o, i in zip(outputs, inputs, strict=True)],
                                  outputs)

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced
    _reduce_scatter_base = reduce_scatter_single

    # --- gathers -----------------------------------------------------------------------------------
    def allgather(self, output_lists, input_tensors, opts=AllgatherOptions()):
        staged = _Staged()
        outs = [[staged(t) for t in row] for row in output_lists]
        ins = [staged(t, written=False) for t in input_tensors]
        nbytes = sum(_nbytes(row) for row in output_lists)
        return self._run("all_gather", staged, self._gloo.allgather(outs, ins, opts), output_lists, nbytes,
                         self.interconnect.all_gather(nbytes))

    def allgather_coalesced(self, output_lists, input_tensors, opts=AllgatherOptions()):
        return InFlight.together([self.allgather([row], [t], opts) for row, t in zip(output_lists, input_tensors, strict=True)],
                                  output_lists)

    def all_gather_single(self, output, input, opts=AllgatherOptions()):
        rows = list(torch.chunk(output, self.size()))
        staged = _Staged()
        # a CPU output takes the rows in place; a tpu one gets them on the host first
        outs = [[torch.empty(r.shape, dtype=r.dtype) for r in rows] if output.device.type == "tpu" else rows]
        host_in = staged(input, written=False)
        work = self._gloo.allgather(outs, [host_in], opts)
        work.wait()
        if output.device.type == "tpu":  # one copy of the whole output back, not one per row
            with torch.no_grad():
                output.copy_(torch.cat(outs[0]).view_as(output))
            staged.written_directly(output)
        end = self._schedule(staged, "all_gather", _nbytes([output]), self.interconnect.all_gather(_nbytes([output])))
        return InFlight([output], staged.device, end)

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts=AllgatherOptions()):
        return InFlight.together([self.all_gather_single(o, i, opts) for o, i in zip(outputs, inputs, strict=True)],
                                  outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_lists, input_tensors, opts):
        staged = _Staged()
        outs = [[staged(t) for t in row] for row in output_lists]
        ins = [staged(t, written=False) for t in input_tensors]
        nbytes = _nbytes(input_tensors) * self.size()
        return self._run("gather", staged, self._gloo.gather(outs, ins, opts), output_lists, nbytes,
                         self.interconnect.gather(nbytes, opts.rootRank), opts.rootRank)

    def scatter(self, output_tensors, input_lists, opts):
        staged = _Staged()
        outs = [staged(t) for t in output_tensors]
        ins = [[staged(t, written=False) for t in row] for row in input_lists]
        nbytes = _nbytes(output_tensors) * self.size()
        return self._run("scatter", staged, self._gloo.scatter(outs, ins, opts), output_tensors, nbytes,
                         self.interconnect.scatter(nbytes, opts.rootRank), opts.rootRank)

    def broadcast(self, tensors, opts=BroadcastOptions()):
        staged = _Staged()
        host = [staged(t) for t in tensors]
        return self._run("broadcast", staged, self._gloo.broadcast(host, opts), tensors, _nbytes(tensors),
                         self.interconnect.broadcast(_nbytes(tensors)))

    # --- all-to-all ----------------------------------------------------------------------------
    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=AllToAllOptions()):
        staged = _Staged()
        host_out, host_in = staged(output), staged(input, written=False)
        work = self._gloo.alltoall_base(host_out, host_in, output_split_sizes, input_split_sizes, opts)
        return self._run("all_to_all", staged, work, [output], _nbytes([input]),
                         self.interconnect.all_to_all(_nbytes([input])))

    alltoall_base = all_to_all_single

    def alltoall(self, output_tensors, input_tensors, opts=AllToAllOptions()):
        staged = _Staged()
        outs = [staged(t) for t in output_tensors]
        ins = [staged(t, written=False) for t in input_tensors]
        return self._run("all_to_all", staged, self._gloo.alltoall(outs, ins, opts), output_tensors,
                         _nbytes(input_tensors), self.interconnect.all_to_all(_nbytes(input_tensors)))

    def barrier(self, opts=BarrierOptions()):
        self._gloo.barrier(opts).wait()
        return InFlight([], None, None)  # host-only: nothing in flight on the chips

    # --- point to point --------------------------------------------------------------------------
    # A send goes when the sender is ready (its data computed, its interconnect free) and tells the
    # receiver when that was; the data arrives at the later of that and the receiver's own
    # interconnect being free, plus the transfer.
    def send(self, tensors, dst: int, tag: int = 0):
        staged = _Staged()
        host = [staged(t, written=False) for t in tensors]
        ready = -1.0
        if staged.device is not None:
            ready = max(_C.simulated_clock(staged.device), interconnect_free_at.get(staged.device, 0.0))
        clock = torch.tensor([ready], dtype=torch.float64)
        works = [self._gloo.send([clock], dst, tag), self._gloo.send(host, dst, tag)]
        end = None
        if staged.device is not None:
            nbytes = _nbytes(tensors)
            seconds = self.interconnect.point_to_point(self.rank(), dst, nbytes)
            end = interconnect_free_at[staged.device] = ready + seconds
            _C.trace_interconnect(staged.device, "send", ready, end)
            record("send", nbytes, seconds)
        return P2PWork(works, tensors, staged.device, lambda: end)

    def recv(self, tensors, src: int, tag: int = 0):
        staged = _Staged()
        host = [staged(t) for t in tensors]
        clock = torch.tensor([0.0], dtype=torch.float64)
        works = [self._gloo.recv([clock], src, tag), self._gloo.recv(host, src, tag)]

        def arrive() -> float | None:
            staged.finish()
            if staged.device is None:
                return None
            nbytes = _nbytes(tensors)
            seconds = self.interconnect.point_to_point(src, self.rank(), nbytes)
            start = max(float(clock.item()), interconnect_free_at.get(staged.device, 0.0))
            end = interconnect_free_at[staged.device] = start + seconds
            _C.trace_interconnect(staged.device, "recv", start, end)
            for t in staged.written:
                _C.set_arrival(t, end)
            record("recv", nbytes, seconds)
            return end

        return P2PWork(works, tensors, staged.device, arrive)


def create(store, rank: int, size: int, timeout: datetime.timedelta) -> ProcessGroupTPU:
    return ProcessGroupTPU(store, rank, size, timeout)
