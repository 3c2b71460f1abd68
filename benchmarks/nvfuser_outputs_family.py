"""Which variants of nvFuser's several-outputs family fail (identity.wrong_among_outputs), 3 runs
each, on the GPU machine: d74fe877 (neg of a channels_last [1, 5, 213, 127] beside a contiguous
bool, corpus/nvfuser/924dd306a685b404.json) and 858480df (add of a contiguous [1, 32, 1, 2049] and a
channels_last [3, 32, 1, 2049] beside log), each as found, with one op alone, beside other ops, and
with the layouts made alike. Figures: docs/campaigns.md (2026-12-07).

    source .gpu/setup.sh && PYTHONPATH=. python3 benchmarks/nvfuser_outputs_family.py
"""
import copy, json, os, sys
from pathlib import Path
sys.path.insert(0, ".")
from fuzzfuse.pool import worker_env
os.environ.update(worker_env("nvfuser"))
from fuzzfuse.backends import get_backend
from fuzzfuse.corpus import load_case
from fuzzfuse.ir import Graph
from fuzzfuse.job import run_case

backend = get_backend("nvfuser")
ROOT = Path(__file__).resolve().parent.parent


def run(label, case_file, edit):
    case = load_case(ROOT / case_file)
    g = copy.deepcopy(json.load(open(ROOT / case_file))["graph"])
    edit(g)
    keys = []
    for _ in range(3):
        try:
            r = run_case(Graph.from_json(g), backend, options=case.options)
            keys.append(f"{r.signature.kind}:{r.detail.splitlines()[0][:90]}" if r.signature else "passes")
        except Exception as e:
            keys.append(f"error {e!r}"[:120])
    print(f"{label:58} | " + " || ".join(keys), flush=True)


def nodes(*ns, outs):
    def f(g):
        g["nodes"] = [{"args": list(a), "attrs": {}, "name": n, "op": op} for n, op, a in ns]
        g["outputs"] = list(outs)
    return f


def with_(*fs):
    def f(g):
        for x in fs: x(g)
    return f


def shape(i, s):
    def f(g): g["inputs"][i]["shape"] = s
    return f


def layout(i, kind):
    def f(g): g["inputs"][i]["layout"] = {"kind": kind}
    return f


def values(i, dist):
    def f(g): g["inputs"][i]["values"]["dist"] = dist
    return f


d, c = "corpus/nvfuser/924dd306a685b404.json", "minimized/nvfuser-mismatch-nan-inf-float-858480df/case.json"
run("d74: as found", d, lambda g: None)
run("d74: neg(x0) alone", d, nodes(("v0", "neg", ["x0"]), outs=["v0"]))
run("d74: abs(x0) alone", d, nodes(("v0", "abs", ["x0"]), outs=["v0"]))
run("d74: neg(x0), logical_not(x1)", d, nodes(("v0", "neg", ["x0"]), ("v1", "logical_not", ["x1"]), outs=["v0", "v1"]))
run("d74: where(x1, neg(x0), x0)", d, nodes(("v0", "neg", ["x0"]), ("v1", "where", ["x1", "v0", "x0"]), outs=["v1"]))
run("d74: where(x1, neg(x0), x0), v0 too", d, nodes(("v0", "neg", ["x0"]), ("v1", "where", ["x1", "v0", "x0"]), outs=["v1", "v0"]))
run("d74: as found, x0 contiguous", d, layout(0, "contiguous"))
run("d74: as found, x0 [2,5,213,127]", d, shape(0, [2, 5, 213, 127]))
run("d74: as found, x1 channels_last [1,5,213,127]", d, with_(shape(1, [1, 5, 213, 127]), layout(1, "channels_last")))
run("858: as committed", c, lambda g: None)
run("858: add(x0,x1) alone", c, nodes(("v0", "add", ["x0", "x1"]), outs=["v0"]))
run("858: neg(x1) alone", c, nodes(("v0", "neg", ["x1"]), outs=["v0"]))
run("858: neg(x1), log(x0)", c, nodes(("v0", "neg", ["x1"]), ("v1", "log", ["x0"]), outs=["v0", "v1"]))
run("858: add(x0,x1), neg(x0)", c, nodes(("v0", "add", ["x0", "x1"]), ("v1", "neg", ["x0"]), outs=["v0", "v1"]))
run("858: as committed, x0 arange", c, values(0, "arange"))
run("858: as committed, x1 contiguous", c, layout(1, "contiguous"))
run("858: as committed, x0 [3,32,1,2049]", c, shape(0, [3, 32, 1, 2049]))
