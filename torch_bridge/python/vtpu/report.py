"""A performance report a person reads: where the simulated time went, kernel by kernel, against
the chip's roofline.

    vtpu.report("out")                       # the kernels run since the last vtpu.reset_stats()
    with vtpu.report.profile("out", model_flops=2 * parameters * tokens):
        model(ids)                           # resets the counters, shows progress, traces
    python -m vtpu.report -o out [--model-flops F] script.py [args...]

writes
- out/report.md: the totals (simulated time, MXU utilisation, MFU when the model's FLOPs are
  given, HBM traffic and utilisation) and every kernel, most time first, with its FLOPs, bytes,
  arithmetic intensity, achieved rate and how close it came to its roof;
- out/roofline.png: each kernel with MXU work as a point (intensity vs achieved FLOP/s, its size
  its share of the time) under the chip's compute and bandwidth roofs, and beside it the time
  breakdown of the top kernels (matplotlib);
- out/trace.json (profile() only): torch.profiler's Chrome trace, host ops and the chip's kernels
  on one timeline (open it at ui.perfetto.dev).
What the counts mean (executed MXU FLOPs, HBM bytes, chip-seconds) is in vtpu/roofline.py.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import pathlib
import runpy
import sys
import types

from . import roofline
from .progress import progress


@dataclasses.dataclass
class Report:
    directory: pathlib.Path
    kernels: list[roofline.KernelPoint]
    totals: roofline.Totals
    files: list[pathlib.Path]

    def summary(self) -> str:
        t = self.totals
        mfu = f"{t.mfu:.1%}" if t.mfu is not None else "- (pass model_flops)"
        return (f"{t.chip.name}: {t.seconds * 1e3:.3f} ms simulated in {t.launches} launches of {len(self.kernels)} kernels; "
                f"MXU utilisation {t.mxu_utilisation:.1%}, MFU {mfu}, HBM {t.hbm_bytes / 1e9:.3f} GB at "
                f"{t.hbm_utilisation:.1%} of peak bandwidth; report in {self.directory}")


def report(directory, *, stats: dict | None = None, chip: str | None = None, model_flops: float | None = None,
           top: int = 40) -> Report:
    """Writes report.md and roofline.png for `stats` (vtpu.stats() by default: everything since the
    last reset_stats) on `chip` (the one this process simulates by default)."""
    import vtpu

    stats = vtpu.stats() if stats is None else stats
    c = roofline.chip(chip or vtpu.chip_name())
    kernels, totals = roofline.kernels_and_totals(stats, c, model_flops)
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    out = Report(directory, kernels, totals, [directory / "report.md", directory / "roofline.png"])
    out.files[0].write_text(_markdown(out, stats, top))
    _draw(kernels, c, out.files[1])
    return out


@dataclasses.dataclass
class Profiled:
    """What profile() yields; `report` is filled when the block ends."""
    report: Report | None = None


@contextlib.contextmanager
def profile(directory, *, model_flops: float | None = None, show_progress: bool = True, trace: bool = True):
    """Runs the block from zeroed counters (pending work is flushed first), with progress bars for
    long flushes and torch.profiler recording, then writes the report and out/trace.json."""
    import torch
    import vtpu
    from torch.profiler import ProfilerActivity

    directory = pathlib.Path(directory)
    profiled = Profiled()
    vtpu.synchronize()
    vtpu.reset_stats()
    with contextlib.ExitStack() as stack:
        stack.enter_context(progress(show_progress))
        recorder = None
        if trace:
            recorder = stack.enter_context(torch.profiler.profile(
                activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]))
        yield profiled
        vtpu.synchronize()
    profiled.report = report(directory, model_flops=model_flops)
    if recorder is not None:
        recorder.export_chrome_trace(str(directory / "trace.json"))
        profiled.report.files.append(directory / "trace.json")


def _markdown(r: Report, stats: dict, top: int) -> str:
    t, c = r.totals, r.totals.chip
    mfu = f"{t.mfu:.1%}" if t.mfu is not None else "- (give the model's FLOPs: model_flops=...)"
    lines = [
        "# vtpu performance report", "",
        f"Chip **{c.name}**: {c.peak_flops / 1e12:,.0f} TFLOP/s bf16, HBM {c.peak_bandwidth / 1e9:,.0f} GB/s "
        f"(the model streams at {c.sustained_bandwidth / c.peak_bandwidth:.0%} of it), ridge point "
        f"{c.ridge_intensity:.0f} FLOP/byte.", "",
        "| | |", "| --- | --- |",
        f"| simulated kernel time | {t.seconds * 1e3:,.3f} ms |",
        f"| launches | {t.launches:,} of {len(r.kernels):,} kernels |",
        f"| MXU work (executed, padding included) | {t.flops / 1e9:,.3f} GFLOP |",
        f"| MXU utilisation | {t.mxu_utilisation:.1%} |",
        f"| MFU (model FLOPs over the peak's) | {mfu} |",
        f"| HBM traffic | {t.hbm_bytes / 1e9:,.3f} GB |",
        f"| HBM utilisation (of the peak bandwidth) | {t.hbm_utilisation:.1%} |",
        f"| ops run on the host CPU (fallbacks) | {stats.get('cpu_fallback_ops', 0)} |",
        "", "## Kernels, most time first", "",
        "Bound: which roof limits the kernel at its arithmetic intensity (a kernel without MXU work is "
        "judged by its HBM bandwidth; one that moved no HBM bytes worked in VMEM held between kernels). "
        "Reached: achieved FLOP/s over that roof, or HBM bandwidth over the peak.", "",
        "| kernel | launches | ms | share | GFLOP | HBM MB | FLOP/B | TFLOP/s | GB/s | bound | reached |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for k in r.kernels[:top]:
        intensity = "-" if k.flops == 0 else ("inf" if k.intensity == float("inf") else f"{k.intensity:,.0f}")
        lines.append(f"| `{_short(k.label, 60)}` | {k.launches:,} | {k.seconds * 1e3:,.3f} | {k.share:.1%} | "
                     f"{k.flops / 1e9:,.1f} | {k.hbm_bytes / 1e6:,.1f} | {intensity} | {k.achieved_flops / 1e12:,.1f} | "
                     f"{k.achieved_bandwidth / 1e9:,.0f} | {k.bound(c)} | {k.judged(c)} |")
    rest = r.kernels[top:]
    if rest:
        lines.append(f"\n{len(rest)} more kernels: {sum(k.share for k in rest):.1%} of the time.")
    return "\n".join(lines) + "\n"


def _short(label: str, width: int) -> str:
    return label if len(label) <= width else label[:width - 3] + "..."


def _draw(kernels: list[roofline.KernelPoint], c: roofline.Chip, path: pathlib.Path, labelled: int = 6) -> None:
    try:
        import matplotlib
    except ImportError as e:
        raise RuntimeError("vtpu.report draws its roofline with matplotlib: pip install matplotlib") from e
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(15, 6), gridspec_kw={"width_ratios": [1.1, 1]})
    mxu = [k for k in kernels if k.flops > 0 and k.hbm_bytes > 0 and k.seconds > 0]
    low = min([c.ridge_intensity / 100] + [k.intensity / 2 for k in mxu])
    high = max([c.ridge_intensity * 100] + [k.intensity * 2 for k in mxu])
    xs = [low, c.ridge_intensity, high]
    left.loglog(xs, [c.roof(x) / 1e12 for x in xs], color="black", label="roof (peak FLOP/s, peak HBM)")
    left.loglog(xs[:2], [x * c.sustained_bandwidth / 1e12 for x in xs[:2]], color="gray", linestyle="--",
                label=f"HBM at the modelled {c.sustained_bandwidth / c.peak_bandwidth:.0%}")
    for i, k in enumerate(mxu):
        color = "tab:blue" if k.bound(c) == "compute" else "tab:orange"
        left.scatter(k.intensity, k.achieved_flops / 1e12, s=20 + 600 * k.share, color=color, alpha=0.6)
        if i < labelled:
            left.annotate(_short(k.label, 28), (k.intensity, k.achieved_flops / 1e12), fontsize=7,
                          xytext=(4, 4), textcoords="offset points")
    left.set_xlabel("arithmetic intensity (MXU FLOPs per HBM byte)")
    left.set_ylabel("achieved TFLOP/s")
    left.set_title(f"{c.name} roofline: kernels with MXU work (size: share of time)")
    left.legend(loc="lower right", fontsize=8)
    left.grid(True, which="both", alpha=0.3)

    shown = kernels[:15][::-1]
    colors = ["tab:gray" if k.flops == 0 else ("tab:blue" if k.bound(c) == "compute" else "tab:orange") for k in shown]
    right.barh([_short(k.label, 40) for k in shown], [100 * k.share for k in shown], color=colors)
    for y, k in enumerate(shown):
        right.text(100 * k.share, y, f" {k.judged(c)}", va="center", fontsize=7)
    right.set_xlabel("share of simulated time (%)")
    right.set_title("top kernels (blue compute-bound, orange memory-bound, gray no MXU work)")
    right.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m vtpu.report", description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", default="vtpu_report", help="directory for report.md, roofline.png, trace.json")
    parser.add_argument("--model-flops", type=float, help="the model's useful FLOPs in the run, for MFU")
    parser.add_argument("--no-trace", action="store_true", help="skip torch.profiler's trace (faster on long runs)")
    parser.add_argument("script", help="a Python script, run as __main__")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    a = parser.parse_args(argv)
    sys.argv = [a.script, *a.args]
    with profile(a.output, model_flops=a.model_flops, trace=not a.no_trace) as profiled:
        runpy.run_path(a.script, run_name="__main__")
    print(profiled.report.summary())


class _CallableModule(types.ModuleType):
    """`vtpu.report(...)` calls report() while `vtpu.report.profile` and `python -m vtpu.report`
    keep working: the module object itself is callable."""

    def __call__(self, *args, **kwargs) -> Report:
        return report(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

if __name__ == "__main__":
    main()
