"""GPU probe for the nvFuser backend (run on the GPU machine; not collected by pytest):

    python -m tests.nvfuser_gpu_probe OUTDIR

1. Runs HANDMADE: minimal nvfuser_direct repros of the nvFuser bugs fuzzfuse found (the
   reducer's output, made standalone), printing each one's outputs or error.
2. Reduces the random graphs listed in PROBE_FOUND ("seed:style,..."; generate(seed) with the
   nvFuser shape policy) with fuzzfuse.reduce, candidates run in isolated workers, and prints
   the reduced graph, its emitted source and the error.
PROBE_SECONDS bounds the reductions; PROBE_QUERIES bounds each one.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

DEADLINE = time.monotonic() + float(os.environ.get("PROBE_SECONDS", "200"))
# (seed, style) of random graphs that failed in nvFuser on the first GPU run.
FOUND = [(int(s.split(":")[0]), s.split(":")[1]) for s in
         os.environ.get("PROBE_FOUND", "45:upcast,212:direct,259:upcast,291:upcast").split(",")]


def log(*a):
    print(*a, flush=True)


def init():
    from tests.test_nvfuser import gpu_init
    gpu_init()


def job(j: dict) -> dict:
    from tests.test_nvfuser import gpu_job
    return gpu_job(j)


def key(res: dict) -> tuple | None:
    sig = res.get("signature")
    if res.get("outcome") not in ("crash", "mismatch") or not sig:
        return None
    return (sig["outcome"], sig["stage"], sig["kind"], sig["location"])


# Minimal repros (the reducer's output from the second GPU run, and hand-made variants).
HANDMADE = {
    "exprEval_remainder_reduced": ("""
T0 = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=False)
T1 = fd.define_tensor(shape=[1], contiguity=[None], dtype=DataType.Half, is_cpu=False)
T2 = fd.ops.cast(T1, dtype=DataType.Float)
T3 = fd.ops.remainder(T0, T2)
T4 = fd.ops.cast(T3, dtype=DataType.Half)
T5 = fd.ops.reshape(T4, new_shape=[1, 1])
T6 = fd.ops.cast(T4, dtype=DataType.Float)
T7 = fd.ops.cast(T5, dtype=DataType.Float)
T8 = fd.ops.add(T6, T7)
T9 = fd.ops.cast(T8, dtype=DataType.Half)
fd.add_output(T9)""", "[torch.zeros((), device='cuda'), torch.zeros(1, dtype=torch.float16, device='cuda')]"),
    "exprEval_remainder_float": ("""
T0 = fd.define_tensor(shape=[], contiguity=[], dtype=DataType.Float, is_cpu=False)
T1 = fd.define_tensor(shape=[1], contiguity=[None], dtype=DataType.Float, is_cpu=False)
T2 = fd.ops.remainder(T0, T1)
T3 = fd.ops.reshape(T2, new_shape=[1, 1])
T4 = fd.ops.add(T2, T3)
fd.add_output(T4)""", "[torch.ones((), device='cuda'), torch.full((1,), 3.0, device='cuda')]"),
    "exprEval_log_reduced": ("""
T0 = fd.define_tensor(shape=[1, 1], contiguity=[None, None], dtype=DataType.BFloat16, is_cpu=False)
T1 = fd.ops.cast(T0, dtype=DataType.Float)
T2 = fd.ops.log(T1)
T3 = fd.ops.cast(T2, dtype=DataType.BFloat16)
T4 = fd.ops.cast(T3, dtype=DataType.Float)
T5 = fd.ops.eq(T1, T4)
T6 = fd.ops.permute(T3, dims=[1, 0])
T7 = fd.ops.cast(T6, dtype=DataType.Float)
T8 = fd.ops.eq(T5, T7)
fd.add_output(T8)""", "[torch.zeros(1, 1, dtype=torch.bfloat16, device='cuda')]"),
    "exprEval_log_float": ("""
T0 = fd.define_tensor(shape=[1, 1], contiguity=[None, None], dtype=DataType.Float, is_cpu=False)
T1 = fd.ops.log(T0)
T2 = fd.ops.eq(T0, T1)
T3 = fd.ops.permute(T1, dims=[1, 0])
T4 = fd.ops.eq(T2, T3)
fd.add_output(T4)""", "[torch.full((1, 1), 2.0, device='cuda')]"),
    "normalization_utils_1986": ("""
T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)
T1 = fd.ops.add(T0, T0)
T2 = fd.ops.sum(T1, dims=[0])
T3 = fd.ops.neg(T0)
T4 = fd.ops.add(T1, T3)
T5 = fd.ops.add(T2, T3)
fd.add_output(T4)
fd.add_output(T5)""", "[torch.zeros(2, device='cuda')]"),
    "reduce_expanded_shape (expect (1,))": ("""
T0 = fd.define_tensor(shape=[-1], contiguity=[None], dtype=DataType.Float, is_cpu=False)
T1 = fd.ops.max(T0, dims=[0])
T2 = fd.ops.broadcast(T1, is_broadcast_dim=[True])
fd.add_output(T2)""", "[torch.randn(1, device='cuda').expand(2)]"),
    "reduce_expanded_shape_keepdim (expect (1, 3))": ("""
T0 = fd.define_tensor(shape=[-1, -1], contiguity=[None, True], dtype=DataType.Float, is_cpu=False)
T1 = fd.ops.sum(T0, dims=[0], keepdim=True)
fd.add_output(T1)""", "[torch.randn(1, 3, device='cuda').expand(5, 3)]"),
    "max_double_dblmax (expect [1.797e308])": ("""
T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Double, is_cpu=False)
T1 = fd.ops.max(T0, dims=[1])
T2 = fd.ops.broadcast(T1, is_broadcast_dim=[False, True])
T3 = fd.ops.sub(T0, T2)
T4 = fd.ops.exp(T3)
T5 = fd.ops.sum(T4, dims=[1])
fd.add_output(T1)
fd.add_output(T3)
fd.add_output(T4)
fd.add_output(T5)""", "[torch.tensor([[-0.5, 1.7976931348623157e308, 2.0]], dtype=torch.float64, device='cuda')]"),
    "max_double_dblmax_alone (expect [1.797e308])": ("""
T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Double, is_cpu=False)
T1 = fd.ops.max(T0, dims=[1])
fd.add_output(T1)""", "[torch.tensor([[-0.5, 1.7976931348623157e308, 2.0]], dtype=torch.float64, device='cuda')]"),
    "lerp_neg_weight_inf (torch: nan)": ("""
T0 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)
T1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)
T2 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float, is_cpu=False)
T3 = fd.ops.lerp(T0, T1, T2)
fd.add_output(T3)""", "[torch.tensor([-3.39, 1.0], device='cuda'), torch.tensor([-float('inf'), 2.0], device='cuda'), torch.tensor([-2.53, 0.7], device='cuda')]"),
}


def handmade():
    import torch  # noqa: F401
    import nvfuser_direct as nvf
    for name, (body, inputs) in HANDMADE.items():
        src = "def nvfuser_fusion(fd):\n" + "\n".join("    " + ln for ln in body.strip().splitlines()) + "\n"
        ns = {"DataType": nvf.DataType, "torch": __import__("torch")}
        exec(src, ns)
        try:
            with nvf.FusionDefinition() as fd:
                ns["nvfuser_fusion"](fd)
            outs = fd.execute(eval(inputs, ns))
            log(f"handmade {name}: ran, outputs " + "; ".join(
                f"{tuple(o.shape)} {str(o.dtype)[6:]}" + (f" = {o.flatten().tolist()}" if o.numel() <= 4 else "")
                for o in outs))
        except Exception as e:
            text = str(e)
            head = next((ln for ln in text.splitlines() if "Unexpected" in ln or "Expected" in ln or "ASSERT" in ln),
                        text.splitlines()[0] if text else "")
            loc = next((ln for ln in text.splitlines() if "Exception raised from" in ln), "")
            log(f"handmade {name}: {type(e).__name__}: {head.strip()[:300]} || {loc.strip()[:200]}")


def reduce_found(pool):
    from fuzzfuse.backends.nvfuser import NvFuserBackend
    from fuzzfuse.backends.nvfuser_emit import emit
    from fuzzfuse.reduce.engine import reduce
    from fuzzfuse.strategies import GenConfig, generate
    counter = [10_000]

    def run_many(graphs, style):
        jobs = []
        for g in graphs:
            counter[0] += 1
            jobs.append({"id": counter[0], "tag": "cand", "style": style, "graph": g.to_json()})
        return pool.run_all(jobs)

    for seed, style in FOUND:
        if time.monotonic() > DEADLINE:
            log("DEADLINE before reducing", seed)
            break
        graph = generate(seed, GenConfig(shapes=NvFuserBackend.shapes))
        first = run_many([graph], style)[0]
        want = key(first)
        log(f"== seed{seed} [{style}]: {first.get('outcome')} {want} :: {str(first.get('detail'))[:300]}")
        styles = [style]
        if want is None:
            other = "upcast" if style == "direct" else "direct"
            first = run_many([graph], other)[0]
            want = key(first)
            log(f"   other style {other}: {first.get('outcome')} {want}")
            if want is None:
                continue
            style = other

        def interesting(cands, style=style, want=want):
            return [key(r) == want for r in run_many(cands, style)]
        start = time.monotonic()
        try:
            red = reduce(graph, interesting, batch=14, max_queries=int(os.environ.get("PROBE_QUERIES", "260")))
        except Exception:
            log("   reduce failed:", traceback.format_exc()[-800:])
            continue
        g = red.graph
        final = run_many([g], style)[0]
        log(f"   reduced {red.stats['ops_before']} -> {g.size} ops in {time.monotonic() - start:.0f}s "
            f"({red.stats['queries']} queries, {red.stats['stopped']})")
        log("   graph:", json.dumps(g.to_json(), sort_keys=True))
        log("   source:\n" + emit(g, style).source)
        detail = str(final.get("detail"))
        log("   error:", detail[:1500])


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    from fuzzfuse.backends.nvfuser import enable_segmenter_logging
    enable_segmenter_logging()
    try:
        handmade()
    except Exception:
        log("handmade failed", traceback.format_exc()[-1500:])
    from fuzzfuse.worker import WorkerPool
    with WorkerPool(int(os.environ.get("PROBE_WORKERS", "14")), "tests.nvfuser_gpu_probe:job", timeout=150,
                    init="tests.nvfuser_gpu_probe:init") as pool:
        reduce_found(pool)


if __name__ == "__main__":
    main()
