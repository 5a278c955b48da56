"""A GPT-2-style model (built from a config, random weights) forward pass in every vtpu mode and on
the CPU, measured in one run.

Prints:
  - simulated device time per forward: strict_eager vs defer_and_fuse vs compiled (backend "tpu");
  - compile time of backend "tpu" (first call, Dynamo + AOT + planning + kernel generation) and its
    cached-call host time;
  - host wall time per forward of each vtpu mode against native PyTorch CPU eager and against
    torch.compile with inductor on the CPU (its compile time too);
  - dynamic=True over several sequence lengths: Dynamo graphs compiled, plans made, kernel
    programs generated (row counts are launch arguments, so a new length generates only the
    programs whose columns or contraction depend on it), and the host time of a new length vs a
    length seen before.
Token ids, positions and masks are int64, which the chip has no kernels for: those ops run through
the CPU fallback (counted and printed); simulated time covers what ran on the chip.
Usage: python3 bench/compiled_gpt2.py [--layers 2 --width 128 --tokens 64 --reps 5]
"""
import argparse
import time
import warnings

import torch
import transformers

import vtpu


def timed(fn, reps):
    """Mean host seconds of fn() over reps calls (after the caller's warm-up)."""
    started = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - started) / reps


def forward(model, ids):
    with torch.no_grad():
        return model(ids).logits


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    vtpu.set_cpu_fallback(True)

    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=4, vocab_size=1024,
                                     n_positions=256, bos_token_id=0, eos_token_id=1)
    cpu_model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(2, 1024, (2, args.tokens))
    expected = forward(cpu_model, ids)
    print(f"GPT-2 style: {args.layers} layers, width {args.width}, batch 2 x {args.tokens} tokens, "
          f"chip {vtpu.chip_name()}")

    rows = {}
    forward(cpu_model, ids)
    rows["cpu eager"] = {"wall": timed(lambda: forward(cpu_model, ids), args.reps)}

    torch._dynamo.reset()
    inductor = torch.compile(cpu_model, backend="inductor")
    started = time.perf_counter()
    forward(inductor, ids)
    inductor_compile = time.perf_counter() - started
    rows["cpu inductor"] = {"wall": timed(lambda: forward(inductor, ids), args.reps)}

    tpu_model = cpu_model.to("tpu")  # moves cpu_model's parameters too: the CPU runs are done
    tpu_ids = ids.to("tpu")
    compile_seconds = None
    for mode in ("strict_eager", "defer_and_fuse", "compiled"):
        vtpu.set_mode("defer_and_fuse" if mode == "compiled" else mode)
        runner = tpu_model
        if mode == "compiled":
            torch._dynamo.reset()
            runner = torch.compile(tpu_model, backend="tpu")
        vtpu.synchronize()
        vtpu.reset_stats()
        started = time.perf_counter()
        out = forward(runner, tpu_ids).cpu()  # first call: compiles (compiled mode), fills the caches
        first = time.perf_counter() - started
        if mode == "compiled":
            compile_seconds = first
        torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
        vtpu.reset_stats()
        wall = timed(lambda: forward(runner, tpu_ids).cpu(), args.reps)
        s = vtpu.stats()
        rows[f"tpu {mode}"] = {"wall": wall, "sim": s["simulated_seconds"] / args.reps,
                               "kernels": s["kernels_launched"] / args.reps,
                               "fallbacks": s["cpu_fallback_ops"] / args.reps}

    print(f"\n{'':22}{'host wall ms':>14}{'simulated us':>14}{'kernels':>9}{'CPU-fallback ops':>18}")
    for name, r in rows.items():
        sim = f"{r['sim'] * 1e6:14.1f}" if "sim" in r else f"{'':>14}"
        extra = f"{r['kernels']:9.0f}{r['fallbacks']:18.0f}" if "sim" in r else ""
        print(f"{name:22}{r['wall'] * 1e3:14.2f}{sim}{extra}")
    strict, defer, compiled = rows["tpu strict_eager"], rows["tpu defer_and_fuse"], rows["tpu compiled"]
    print(f"\nsimulated time: strict / defer = {strict['sim'] / defer['sim']:.2f}x, "
          f"strict / compiled = {strict['sim'] / compiled['sim']:.2f}x, defer / compiled = {defer['sim'] / compiled['sim']:.2f}x")
    print(f"compile time, first call: backend tpu {compile_seconds:.2f} s (then {compiled['wall'] * 1e3:.1f} ms/call), "
          f"inductor on CPU {inductor_compile:.2f} s (then {rows['cpu inductor']['wall'] * 1e3:.1f} ms/call)")
    cpu = rows["cpu eager"]["wall"]
    print("host wall time vs native CPU eager: " + ", ".join(
        f"{name} {r['wall'] / cpu:.1f}x" for name, r in rows.items() if name != "cpu eager"))

    dynamic_shapes(tpu_model, args)


def dynamic_shapes(tpu_model, args):
    vtpu.set_mode("defer_and_fuse")
    torch._dynamo.reset()
    compiled = torch.compile(tpu_model, backend="tpu", dynamic=True)
    # Lengths the static runs above did not use (their plans and programs are cached already).
    half = args.tokens // 2
    lengths = [half, half + 8, half + 16, half + 8, half + 16]
    vtpu.reset_stats()
    print(f"\ndynamic=True over sequence lengths {lengths}:")
    seen = set()
    programs_before_first = vtpu.stats()["cache_misses"]
    for n in lengths:
        ids = torch.randint(2, 1024, (2, n)).to("tpu")
        before, known = vtpu.stats(), set(vtpu.cached_programs())
        started = time.perf_counter()
        forward(compiled, ids).cpu()
        elapsed = time.perf_counter() - started
        after = vtpu.stats()
        made = after["cache_misses"] - before["cache_misses"]
        print(f"  length {n:4} ({'seen' if n in seen else 'new '}): {elapsed * 1e3:8.1f} ms host, "
              f"Dynamo graphs compiled so far {after['compiled_graphs']}, "
              f"plans made {after['plan_cache_misses'] - before['plan_cache_misses']}, "
              f"programs generated {made}, reused {after['cache_hits'] - before['cache_hits']}")
        if made and n != lengths[0]:
            kinds = sorted(" ".join(key.split("|")[:2]) for key in set(vtpu.cached_programs()) - known)
            print("    generated: " + ", ".join(kinds))
        seen.add(n)
    s = vtpu.stats()
    print(f"  recompiles: {s['compiled_graphs'] - 1} Dynamo recompiles for {len(set(lengths))} lengths; "
          f"{s['plan_cache_misses']} plans and {s['cache_misses'] - programs_before_first} programs generated in all")


if __name__ == "__main__":
    main()
