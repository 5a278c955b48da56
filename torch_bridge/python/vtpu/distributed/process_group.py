"""The torch.distributed backend "tpu_dist": one rank per simulated chip, each rank a process.

Data moves between the ranks through Gloo on the host (sound and simple): a collective copies its
tpu tensors to the host, runs Gloo's collective there and copies the results back. What the
chips would spend on it is the simulator's interconnect model (interconnect.py): a collective starts when
the last rank reaches it, every rank's simulated clock then moves to that start plus the
collective's closed-form time, so the ranks' clocks agree after each collective. Collectives are
synchronous on the host and on the simulated timeline (no overlap with compute yet); sends and
receives are asynchronous on the host, so rings of batch_isend_irecv do not deadlock.

CPU tensors go to Gloo as they are, untimed, so one group serves `tpu` and `cpu` tensors.
"""

from __future__ import annotations

import datetime

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import (AllgatherOptions, AllreduceOptions, AllToAllOptions, BarrierOptions,
                                        BroadcastOptions, ReduceOp, ReduceScatterOptions, _create_work_from_future)
from torch.futures import Future

from .. import _C
from . import interconnect
from .collective_stats import record

_LOOPBACK = "127.0.0.1"


def _done(result) -> dist.Work:
    future = Future()
    future.set_result(result)
    return _create_work_from_future(future)


class _Staged:
    """A collective's tensors on the host: tpu tensors copied out (contiguous, as Gloo needs)
    and, for those the collective writes, copied back by `finish`; CPU tensors used as they are."""

    def __init__(self):
        self.device: int | None = None
        self._back: list[tuple[torch.Tensor, torch.Tensor]] = []

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
    def _charge(self, staged: _Staged, name: str, nbytes: int, seconds: float) -> None:
        """Every rank's clock moves to the latest rank's start plus `seconds`."""
        if staged.device is None:
            return
        start = _C.simulated_clock(staged.device)
        starts = torch.tensor([start], dtype=torch.float64)
        self._gloo.allreduce([starts], self._max()).wait()
        end = float(starts.item()) + seconds
        _C.advance_clock(staged.device, max(0.0, end - start))
        record(name, nbytes, seconds, end - start)

    @staticmethod
    def _max() -> AllreduceOptions:
        opts = AllreduceOptions()
        opts.reduceOp = ReduceOp.MAX
        return opts

    def _run(self, name: str, staged: _Staged, work: dist.Work, result, nbytes: int, seconds: float) -> dist.Work:
        work.wait()
        staged.finish()
        self._charge(staged, name, nbytes, seconds)
        return _done(result)

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
        works = [self.allreduce([t], single) for t in tensors]
        for w in works:
            w.wait()
        return _done(tensors)

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
        for o, i in zip(outputs, inputs, strict=True):
            self.reduce_scatter_single(o, i, opts).wait()
        return _done(outputs)

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
        for row, t in zip(output_lists, input_tensors, strict=True):
            self.allgather([row], [t], opts).wait()
        return _done(output_lists)

    def all_gather_single(self, output, input, opts=AllgatherOptions()):
        rows = list(torch.chunk(output, self.size()))
        staged = _Staged()
        outs = [[staged(r, written=False) for r in rows]]
        host_in = staged(input, written=False)
        work = self._gloo.allgather(outs, [host_in], opts)
        work.wait()
        if output.device.type == "tpu":  # one copy of the whole output back, not one per row
            with torch.no_grad():
                output.copy_(torch.cat(outs[0]).view_as(output))
        self._charge(staged, "all_gather", _nbytes([output]), self.interconnect.all_gather(_nbytes([output])))
        return _done([output])

    _allgather_base = all_gather_single

    def all_gather_single_coalesced(self, outputs, inputs, opts=AllgatherOptions()):
        for o, i in zip(outputs, inputs, strict=True):
            self.all_gather_single(o, i, opts).wait()
        return _done(outputs)

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_lists, input_tensors, opts):
        staged = _Staged()
        outs = [[staged(t) for t in row] for row in output_lists]
        ins = [staged(t, written=False) for t in input_tensors]
        nbytes = _nbytes(input_tensors) * self.size()
        return self._run("gather", staged, self._gloo.gather(outs, ins, opts), output_lists, nbytes,
                         self.interconnect.all_gather(nbytes))

    def scatter(self, output_tensors, input_lists, opts):
        staged = _Staged()
        outs = [staged(t) for t in output_tensors]
        ins = [[staged(t, written=False) for t in row] for row in input_lists]
        nbytes = _nbytes(output_tensors) * self.size()
        return self._run("scatter", staged, self._gloo.scatter(outs, ins, opts), output_tensors, nbytes,
                         self.interconnect.reduce_scatter(nbytes))

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
        return _done([])

    # --- point to point --------------------------------------------------------------------------
    def send(self, tensors, dst: int, tag: int = 0):
        staged = _Staged()
        host = [staged(t, written=False) for t in tensors]
        nbytes = _nbytes(tensors)
        seconds = self.interconnect.point_to_point(self.rank(), dst, nbytes)
        start = _C.simulated_clock(staged.device) if staged.device is not None else -1.0
        clock = torch.tensor([start], dtype=torch.float64)  # the receiver's data arrives no earlier
        works = [self._gloo.send([clock], dst, tag), self._gloo.send(host, dst, tag)]
        if staged.device is not None:
            _C.advance_clock(staged.device, seconds)  # the sender's DMA engine is busy that long
            record("send", nbytes, seconds, seconds)
        return _P2PWork(works, tensors, finish=None)

    def recv(self, tensors, src: int, tag: int = 0):
        staged = _Staged()
        host = [staged(t) for t in tensors]
        clock = torch.tensor([0.0], dtype=torch.float64)
        works = [self._gloo.recv([clock], src, tag), self._gloo.recv(host, src, tag)]

        def finish():
            staged.finish()
            if staged.device is None:
                return
            nbytes = _nbytes(tensors)
            seconds = self.interconnect.point_to_point(src, self.rank(), nbytes)
            own = _C.simulated_clock(staged.device)
            end = max(own, float(clock.item())) + seconds
            _C.advance_clock(staged.device, end - own)
            record("recv", nbytes, seconds, end - own)

        return _P2PWork(works, tensors, finish)


class _P2PWork(dist.Work):
    """A send or receive in flight on Gloo; a receive's data reaches its tpu tensors on wait()."""

    def __init__(self, works, tensors, finish):
        super().__init__()
        self._works, self._tensors, self._finish = works, tensors, finish

    def wait(self, timeout=None) -> bool:
        if self._works:
            for w in self._works:
                w.wait()
            self._works = []
            if self._finish is not None:
                self._finish()
        return True

    def is_completed(self) -> bool:
        return not self._works

    def get_future(self):
        self.wait()
        future = Future()
        future.set_result(self._tensors)
        return future


def create(store, rank: int, size: int, timeout: datetime.timedelta) -> ProcessGroupTPU:
    return ProcessGroupTPU(store, rank, size, timeout)
