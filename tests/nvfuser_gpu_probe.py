"""One-shot GPU probe for the nvFuser backend (run on the GPU machine, not collected by pytest):

    python -m tests.nvfuser_gpu_probe OUTDIR [--quick]

Prints API facts (versions, ops, signatures), checks the emitter's tensor descriptors against
nvFuser's, records the dtype nvFuser gives each raw op, captures fusion evidence, then runs every
registry op x dtype x style and random generate() graphs through the backend in worker processes.
Results go to OUTDIR/*.jsonl as they arrive (so a killed run still leaves data)."""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

DEADLINE = time.monotonic() + float(os.environ.get("PROBE_SECONDS", "420"))


def log(*a):
    print(*a, flush=True)


# ---- worker side ------------------------------------------------------------------------------
def init():
    from tests.test_nvfuser import gpu_init
    gpu_init()


def job(j: dict) -> dict:
    if "raw" in j:
        return {"tag": j["tag"], "outcome": "raw", "cell": raw_probe(j["raw"], j["dtype"])}
    from tests.test_nvfuser import gpu_job
    return gpu_job(j)


# ---- main-process sections ---------------------------------------------------------------------
def section_env(nvf):
    import torch
    log("== env")
    log("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name())
    log("nvfuser_direct", getattr(nvf, "__version__", "?"))
    names = sorted(n for n in dir(nvf.ops) if not n.startswith("_"))
    log("ops:", " ".join(names))
    from tests.test_nvfuser import KNOWN_OPS
    log("KNOWN_OPS missing on GPU:", sorted(set(KNOWN_OPS) - set(names)))
    for n in ("sum", "max", "prod", "var", "broadcast", "broadcast_in_dim", "expand", "reshape", "permute",
              "cast", "where", "clamp", "lerp", "addcmul", "squeeze", "logical_not", "sign"):
        doc = (getattr(nvf.ops, n).__doc__ or "").strip().splitlines()
        sigs = [ln for ln in doc if ln.strip().startswith(f"{n}(") or "->" in ln][:6]
        log(f"sig {n}:", " || ".join(s.strip() for s in sigs))
    for n in ("define_tensor", "define_scalar"):
        doc = (getattr(nvf, n).__doc__ or "").strip().splitlines()
        log(f"sig {n}:", " || ".join(s.strip() for s in doc if "->" in s)[:800])
    fd_methods = [m for m in dir(nvf.FusionExecutorCache) if not m.startswith("_")]
    log("FusionExecutorCache:", fd_methods)
    log("module:", [m for m in dir(nvf) if not m.startswith("_")])


def section_descriptors(nvf):
    import torch
    from fuzzfuse.backends.nvfuser_emit import tensor_descriptor
    log("== descriptors")
    def cases(dev):
        e = lambda *s: torch.empty(*s, device=dev)  # noqa: E731
        return [e(2, 3, 4), e(2, 1, 4), e(2, 3, 4, 5).contiguous(memory_format=torch.channels_last),
                e(2, 3, 2, 4, 5).contiguous(memory_format=torch.channels_last_3d),
                e(4, 2, 3).permute(1, 2, 0), e(2, 6, 4)[:, ::2], e(2, 3, 8)[..., ::2],
                e(2, 1, 4).expand(2, 3, 4), e(1, 3, 1).expand(2, 3, 4),
                e(1, 3, 1).expand(2, 3, 4).permute(2, 0, 1), e(3, 1, 1, 5)[:, :, :, ::2],
                e(1, 4, 1, 2).contiguous(memory_format=torch.channels_last), e(5, 1)[::3],
                e(()), e(6, 7).t()[1:, ::2], e(4, 1, 3).transpose(0, 1), e(3, 4, 5)[:, 1:3]]
    bad = 0
    for t in cases("cuda"):
        mine = tensor_descriptor(tuple(t.shape), tuple(t.stride()))
        theirs = nvf.compute_tensor_descriptor(list(t.shape), list(t.stride()))
        theirs = (list(theirs[0]), list(theirs[1]))
        ok = mine == theirs
        bad += not ok
        if not ok:
            log("DESCRIPTOR MISMATCH", tuple(t.shape), t.stride(), "mine", mine, "nvfuser", theirs)
        # from_pytorch's printed definition
        with nvf.FusionDefinition() as fd:
            tv = fd.from_pytorch(t)
            fd.add_output(fd.ops.neg(tv))
        line = [ln for ln in repr(fd).splitlines() if "define_tensor" in ln]
        log("from_pytorch", tuple(t.shape), t.stride(), "->", line[0].strip() if line else repr(fd)[:300], "| mine", mine)
    log("descriptor mismatches:", bad)


def _raw_tables(nvf):
    import torch
    import torch.nn.functional as F
    DT = nvf.DataType
    S = lambda fd, v, d: fd.define_scalar(v, dtype=getattr(DT, d))  # noqa: E731
    probes = {
        **{n: (lambda n: lambda fd, a, b: getattr(fd.ops, n)(a))(n) for n in
           "abs neg relu floor ceil round trunc frac sign bitwise_not logical_not isnan isinf silu exp sigmoid".split()},
        **{n: (lambda n: lambda fd, a, b: getattr(fd.ops, n)(a, b))(n) for n in
           "add mul sub truediv div pow maximum minimum remainder fmod atan2 eq logical_and bitwise_and".split()},
        "add_fscalar": lambda fd, a, b: fd.ops.add(a, S(fd, 2.0, "Float")),
        "add_dscalar": lambda fd, a, b: fd.ops.add(a, S(fd, 2.0, "Double")),
        "add_iscalar": lambda fd, a, b: fd.ops.add(a, S(fd, 2, "Int")),
        "where_tt": lambda fd, a, b: fd.ops.where(fd.ops.isnan(a), a, b),
        "where_ts": lambda fd, a, b: fd.ops.where(fd.ops.isnan(a), a, S(fd, 0.5, "Float")),
        "clamp_s": lambda fd, a, b: fd.ops.clamp(a, S(fd, -1.0, "Float"), S(fd, 1.0, "Float")),
        "lerp": lambda fd, a, b: fd.ops.lerp(a, b, S(fd, 0.3, "Float")),
        "addcmul": lambda fd, a, b: fd.ops.addcmul(a, b, a, S(fd, 0.5, "Float")),
        "sum": lambda fd, a, b: fd.ops.sum(a, dims=[1]),
        "prod": lambda fd, a, b: fd.ops.prod(a, dims=[1]),
        "max": lambda fd, a, b: fd.ops.max(a, dims=[1]),
        "min": lambda fd, a, b: fd.ops.min(a, dims=[1]),
        "var": lambda fd, a, b: fd.ops.var(a, dims=[1], correction=1),
        "cast_bool": lambda fd, a, b: fd.ops.cast(a, dtype=DT.Bool),
    }
    refs = {
        "abs": torch.abs, "neg": torch.neg, "relu": torch.relu, "floor": torch.floor, "ceil": torch.ceil,
        "round": torch.round, "trunc": torch.trunc, "frac": torch.frac, "sign": torch.sign,
        "bitwise_not": torch.bitwise_not, "logical_not": torch.logical_not, "isnan": torch.isnan,
        "isinf": torch.isinf, "silu": F.silu, "exp": torch.exp, "sigmoid": torch.sigmoid,
        "add": torch.add, "mul": torch.mul, "sub": torch.sub, "truediv": torch.true_divide,
        "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum, "remainder": torch.remainder,
        "fmod": torch.fmod, "atan2": torch.atan2, "eq": torch.eq, "logical_and": torch.logical_and,
        "bitwise_and": torch.bitwise_and,
        "where_tt": lambda a, b: torch.where(torch.isnan(a), a, b),
        "clamp_s": lambda a, b: torch.clamp(a, -1.0, 1.0), "lerp": lambda a, b: torch.lerp(a, b, 0.3),
        "addcmul": lambda a, b: torch.addcmul(a, b, a, value=0.5), "sum": lambda a, b: a.sum(1),
        "prod": lambda a, b: a.prod(1), "max": lambda a, b: a.amax(1), "min": lambda a, b: a.amin(1),
        "var": lambda a, b: a.var(1), "cast_bool": lambda a, b: a.bool(),
    }
    return probes, refs


def _diff(a, b, o, r) -> str:
    """'' when nvFuser's o matches torch's r (NaN where NaN), else '!{' two examples '}'."""
    import torch
    od, rd = o.double().cpu(), r.double().cpu()
    if od.shape != rd.shape:
        return f"!shape{tuple(od.shape)}vs{tuple(rd.shape)}"
    close = torch.isclose(od, rd, rtol=2e-2, atol=1e-3, equal_nan=True)
    if bool(close.all()):
        return ""
    out = []
    for ij in (~close).nonzero()[:2].tolist():
        row = ij[0]
        col = ij[1] if len(ij) > 1 else None
        ins = f"a={a[row][col].item()!r},b={b[row][col].item()!r}" if col is not None else f"row{row}"
        out.append(f"{ins} nv={od[tuple(ij)].item()!r} torch={rd[tuple(ij)].item()!r}")
    return "!{" + "; ".join(out) + "}"


RAW_PROBES = ("abs neg relu floor ceil round trunc frac sign bitwise_not logical_not isnan isinf silu exp sigmoid "
              "add mul sub truediv div pow maximum minimum remainder fmod atan2 eq logical_and bitwise_and "
              "add_fscalar add_dscalar add_iscalar where_tt where_ts clamp_s lerp addcmul sum prod max min var "
              "cast_bool").split()


def raw_probe(name: str, d: str) -> str:
    """The dtype (and values, against torch) nvFuser gives op `name` on `d` operands."""
    import torch
    import nvfuser_direct as nvf
    from fuzzfuse.backends.nvfuser_emit import NV_DTYPE
    from fuzzfuse.ir import DTYPES
    from fuzzfuse.ir.values import special_values
    probes, refs = _raw_tables(nvf)
    fn = probes[name]
    gen = torch.Generator().manual_seed(0)
    base = (torch.randn(4, 7, generator=gen, dtype=torch.float64) * 3)
    ys = (torch.randn(4, 7, generator=gen, dtype=torch.float64) * 3)
    if d == "bool":
        a, b = base > 0, ys > 0
    elif d in ("int32", "int64"):
        a, b = base.round().to(DTYPES[d]), ys.round().to(DTYPES[d]).clamp(1, 5)
    else:
        a, b = base.to(DTYPES[d]), ys.to(DTYPES[d])
        sp = special_values(d)[:6] + [2.5, -2.5, 0.5, -1.5]
        a.view(-1)[: len(sp)] = torch.tensor(sp, dtype=a.dtype)
    a, b = a.cuda(), b.cuda()
    DT = nvf.DataType
    try:
        with nvf.FusionDefinition() as fd:
            ta = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=getattr(DT, NV_DTYPE[d]),
                                  is_cpu=False, stride_order=[1, 0])
            tb = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=getattr(DT, NV_DTYPE[d]),
                                  is_cpu=False, stride_order=[1, 0])
            fd.add_output(fn(fd, ta, tb))
        o = fd.execute([a, b])[0]
        cell = f"{d}->{str(o.dtype).removeprefix('torch.')}"
        if name in refs:
            try:
                r = refs[name](a, b)
                cell += _diff(a, b, o, r)
            except Exception as e:  # torch rejects the dtype
                cell += f"(torch: {type(e).__name__})"
    except Exception as e:
        msg = str(e).strip().splitlines()
        head = next((ln for ln in msg if "Expected" in ln or "ASSERT" in ln or "error" in ln.lower()), msg[0] if msg else "")
        cell = f"{d}:E[{type(e).__name__}: {head[:200]}]"
    return cell


def section_evidence(nvf):
    import torch
    from fuzzfuse.backends.nvfuser import NvFuserBackend, capture_stdout_fd
    from fuzzfuse.ir import make_inputs
    from fuzzfuse.ir.builder import GraphBuilder
    log("== evidence")
    backend = NvFuserBackend()
    backend.check_available()

    def graphs():
        b = GraphBuilder(); x = b.tensor((64, 1000)); yield "pointwise", b.build([b.add("exp", b.add("add", x, 1.0))])
        b = GraphBuilder(); x = b.tensor((64, 1000)); yield "reduction", b.build([b.add("sum", x, dims=[1], keepdim=False)])
        b = GraphBuilder(); x = b.tensor((8, 4099)); yield "softmax", b.build([b.add("softmax", x, dim=1)])
        b = GraphBuilder(); x = b.tensor((8, 65539)); yield "softmax_big", b.build([b.add("softmax", x, dim=1)])
        b = GraphBuilder(); x = b.tensor((6, 10)); yield "view_only", b.build([b.add("permute", b.add("reshape", x, shape=[10, 6]), dims=[1, 0])])
        b = GraphBuilder(); x = b.tensor((32, 48))
        s0 = b.add("sum", x, dims=[0], keepdim=True); y = b.add("add", x, s0); s1 = b.add("sum", y, dims=[1], keepdim=True)
        yield "segmented", b.build([b.add("mul", y, s1), b.add("amax", b.add("permute", y, dims=[1, 0]), dims=[0], keepdim=False)])
        b = GraphBuilder(); x = b.tensor((5, 7)); yield "reshape_identity_out", b.build([b.add("reshape", x, shape=[5, 7])])
        b = GraphBuilder(); x = b.tensor((5, 7)); yield "permute_identity_out", b.build([b.add("permute", x, dims=[0, 1])])
        b = GraphBuilder(); x = b.tensor((5, 1)); yield "sum_broadcast_dim", b.build([b.add("sum", x, dims=[1], keepdim=False)])
        b = GraphBuilder(); x = b.tensor((5, 1)); yield "var_broadcast_dim", b.build([b.add("var", x, dims=[1], keepdim=True, correction=1)])
        b = GraphBuilder(); x = b.tensor((6,)); r = b.add("reshape", x, shape=[6, 1]); yield "expand_reshaped_1", b.build([b.add("expand", r, sizes=[6, 4])])
        b = GraphBuilder(); x = b.tensor((), "float16"); yield "zero_dim", b.build([b.add("exp", x)])

    for tag, g in graphs():
        inputs = make_inputs(g, "cuda")
        try:
            r = backend.run(g, inputs)
            log(f"{tag}: fused={r.fused} evidence={r.evidence} compile={r.compile_seconds:.3f}s")
        except Exception as e:
            log(f"{tag}: ERROR {type(e).__name__}: {str(e)[:1500]}")
            if hasattr(e, "evidence"):
                log("   evidence:", e.evidence)
    # raw log of one segmented run
    b = GraphBuilder(); x = b.tensor((32, 48))
    s0 = b.add("sum", x, dims=[0], keepdim=True); y = b.add("add", x, s0)
    g = b.build([b.add("mul", y, b.add("sum", y, dims=[1], keepdim=True)), b.add("exp", x)])
    fd = backend.define(backend.emit(g).source)
    with capture_stdout_fd() as cap:
        fd.execute(make_inputs(g, "cuda"))
    text = cap["text"]
    log(f"raw segmenter log: {len(text)} chars; lines with Accepted/segment/group:")
    for ln in text.splitlines():
        if any(k in ln for k in ("Accepted", "egment", "group", "Group")):
            log("   |", ln[:200])
    log("raw head:", text[:1500].replace("\n", "\n   : "))
    try:
        fd2 = backend.define(backend.emit(g).source)
        prof = nvf.PythonProfiler(auto_scheduled=True)
        with prof:
            fd2.execute(make_inputs(g, "cuda"))
        p = prof.profile
        log("profiler segments", p.segments, [(k.segment_id, k.scheduler, k.name[:40]) for k in p.kernel_profiles])
    except Exception as e:
        log("profiler failed:", type(e).__name__, str(e)[:500])
    try:
        log("scheduled ir head:", fd.fec.get_most_recent_scheduled_ir()[:600])
    except Exception as e:
        log("scheduled ir failed:", e)
    # script round trip
    em = backend.emit(g)
    import subprocess
    script = em.script(g)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    log("standalone script rc", r.returncode, r.stdout[-300:], r.stderr[-500:])


def main():
    outdir = sys.argv[1]
    quick = "--quick" in sys.argv
    os.makedirs(outdir, exist_ok=True)
    from fuzzfuse.backends.nvfuser import enable_segmenter_logging
    enable_segmenter_logging()
    t0 = time.monotonic()
    try:
        import nvfuser_direct as nvf
    except ImportError as e:
        log("nvfuser_direct not importable:", e)
        nvf = None
    for section in (section_env, section_descriptors, section_evidence):
        try:
            section(nvf)
        except Exception:
            log(f"SECTION {section.__name__} FAILED\n{traceback.format_exc()}")
    log(f"sections took {time.monotonic() - t0:.1f}s")

    from fuzzfuse.backends.nvfuser_emit import STYLES, emit
    from fuzzfuse.ir import OPS, DTYPES
    from fuzzfuse.worker import WorkerPool
    from tests.test_nvfuser import op_cases
    from tests.test_nvfuser import gpu_jobs
    jobs = [{"tag": f"raw:{name}", "raw": name, "dtype": d} for name in RAW_PROBES for d in DTYPES]
    jobs += gpu_jobs(40 if quick else int(os.environ.get("PROBE_SEEDS", "300")))
    for i, j in enumerate(jobs):
        j["id"] = i
    log(f"{len(jobs)} jobs")
    workers = int(os.environ.get("PROBE_WORKERS", "14"))
    counts: dict = {}
    raw_rows: dict = {}
    with open(os.path.join(outdir, "results.jsonl"), "w") as f, \
            WorkerPool(workers, "tests.nvfuser_gpu_probe:job", timeout=150, init="tests.nvfuser_gpu_probe:init") as pool:
        for j in jobs:
            pool.submit(j)
        for r in pool.results():
            j = jobs[r["id"]]
            if "outcome" not in r:  # the worker died or hung
                r = {**{k: j.get(k) for k in ("tag", "op", "dtype", "style", "seed")}, "outcome": r.get("status"),
                     "detail": str(r)[:3000], "graph": j.get("graph")}
            f.write(json.dumps(r) + "\n")
            f.flush()
            if r["outcome"] == "raw":
                raw_rows.setdefault(j["raw"], {})[j["dtype"]] = r["cell"]
                if len(raw_rows[j["raw"]]) == len(DTYPES):
                    log(f"raw {j['raw']}: " + "  ".join(raw_rows[j["raw"]][d] for d in DTYPES))
                continue
            key = ("seed" if "seed" in j else "op", r["outcome"])
            counts[key] = counts.get(key, 0) + 1
            if r["outcome"] != "pass":
                log(f"FAIL {r.get('tag')} {r.get('style')}: {r['outcome']} {str(r.get('signature'))[:200]} :: "
                    f"{str(r.get('detail'))[:300]}")
            if time.monotonic() > DEADLINE:
                log("DEADLINE: stopping")
                break
    log("counts:", counts, f"total {time.monotonic() - t0:.1f}s")


if __name__ == "__main__":
    main()
