"""Triage merges real campaign shards by signature key, finds flaky buckets, orders the most distinct
first, and writes an HTML report that a real headless Chromium renders."""
import json
import shutil
import struct
import subprocess
import sys
import tarfile
import zlib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from fuzzfuse.identity import case_identity
from fuzzfuse.backends.base import BackendError, RunResult
from fuzzfuse.backends.eager import EagerBackend
from fuzzfuse.campaign import Campaign
from fuzzfuse.corpus import Case
from fuzzfuse.ir import Graph, run_eager
from fuzzfuse.oracle import Signature
from fuzzfuse.report import write_report
from fuzzfuse.strategies import Features
from fuzzfuse.triage import Bucket, TriageError, load, order

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
HOSTILE = "RuntimeError: <script>alert('x')</script> & \"quoted\" </pre>"


class FlakyOnTanh(EagerBackend):
    """Fixture: crashes on tanh only the first time its process runs a graph, so the campaign's
    re-checks of the same case pass and the signature must come out flaky."""
    name = "custom:tests.test_triage:FlakyOnTanh"
    supports_backward = False
    seen: set = set()

    def run(self, graph: Graph, inputs: list) -> RunResult:
        if any(n.op == "tanh" for n in graph.nodes) and graph.digest() not in self.seen:
            self.seen.add(graph.digest())
            raise BackendError("run", RuntimeError("INTERNAL ASSERT FAILED at /src/fuser/csrc/race.cpp:9, a flake"))
        return RunResult(run_eager(graph, inputs)[0], fused=True)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Two real NNC campaigns as two hosts' shards (one reduces its signatures), plus a flaky one."""
    root = tmp_path_factory.mktemp("triage")
    summaries = {
        "a": Campaign("torchscript:nnc", root / "shards" / "a", seed=1, workers=1, max_cases=40, reduce=False).run(),
        "b": Campaign("torchscript:nnc", root / "shards" / "b", seed=2, workers=1, max_cases=40,
                      reduce_budget=30).run(),
        "flaky": Campaign(FlakyOnTanh.name, root / "shards" / "flaky", seed=3, workers=1, max_cases=12, swarm=False,
                          features=Features(ops=("add", "mul", "neg", "tanh"), patterns=()), reduce=False).run(),
    }
    return root, summaries


def _entries(summaries: dict) -> dict[str, list[tuple[str, dict]]]:
    by_key: dict[str, list] = {}
    for shard, s in summaries.items():
        for e in s["signatures"]:
            by_key.setdefault(e["key"], []).append((shard, e))
    return by_key


@pytest.mark.slow
def test_shards_merge_by_signature_key(shards):
    root, summaries = shards
    t = load(root)
    by_key = _entries(summaries)
    assert {b.key for b in t.buckets} == set(by_key)
    assert any(len(v) > 1 for v in by_key.values()), "the two NNC shards share no signature: nothing merged"
    assert t.cases == sum(s["cases"] for s in summaries.values())
    for b in t.buckets:
        seen = by_key[b.key]
        assert b.count == sum(e["count"] for _, e in seen)
        assert b.first_seen == min(e["first_seen"] for _, e in seen)
        assert b.last_seen == max(e["last_seen"] for _, e in seen)
        assert b.shards == {f"shards/{shard}" for shard, _ in seen}
        minimized = [(e["minimized"]["ops_after"], root / "shards" / s / e["minimized"]["path"])
                     for s, e in seen if e.get("minimized")]
        if minimized:  # the smallest repro of any shard, and its own verification
            assert (b.repro_size, b.repro) == min(minimized)
            assert b.verification == json.loads((b.repro / "case.json").read_text())["verification"]["status"]
        else:
            assert b.repro is None and b.case_size == min(e["smallest_size"] for _, e in seen)
            assert b.case.is_file()
    assert any(b.repro is not None for b in t.buckets), "shard b reduced nothing"


@pytest.mark.slow
def test_flaky_campaign_gives_flaky_bucket(shards):
    root, summaries = shards
    flaky = [e for e in summaries["flaky"]["signatures"] if e["confirmed"] is False]
    assert flaky, "the fixture backend's re-checks did not disagree"
    t = load(root)
    got = {b.key: b.flaky for b in t.buckets}
    assert all(got[e["key"]] for e in flaky)
    assert not any(got[e["key"]] for s in ("a", "b") for e in summaries[s]["signatures"] if e["confirmed"])
    # Flaky buckets come after every reproducible bug, before coverage (unfused).
    kinds = ["unfused" if b.outcome == "unfused" else "flaky" if b.flaky else "bug" for b in t.buckets]
    assert kinds == sorted(kinds, key=["bug", "flaky", "unfused"].index)


def _committed_minimized(tmp_path) -> Path:
    """A copy of the committed repros (HEAD's, where this is a git checkout: a fold or a campaign
    rewriting the working tree's minimized/ meanwhile is not half read): triage writes report.html
    into the directory, never into the repo."""
    archive = tmp_path / "minimized.tar"
    made = subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), "HEAD", "minimized"],
                          capture_output=True, timeout=120)
    if made.returncode != 0:
        return Path(shutil.copytree(REPO / "minimized", tmp_path / "minimized"))
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path, filter="data")
    archive.unlink()
    return tmp_path / "minimized"


def test_minimized_repros_bucket_by_their_root_cause(tmp_path):
    root = _committed_minimized(tmp_path)
    cases = {d.name: json.loads((d / "case.json").read_text()) for d in root.iterdir() if (d / "case.json").is_file()}
    t = load(root)
    assert not t.runs and not t.problems
    # Keyed by the repro's bug identity: today's oracle's words for the recorded error, the
    # repro's graph less the fillers its generalisation found, its device. Repros of one identity
    # (a corpus not folded since identities changed) share a bucket: their hits add up and the
    # smallest is its repro.
    members: dict[str, list[str]] = {}
    for name, c in cases.items():
        identity = case_identity(Case.from_json(c))
        assert identity is not None, name
        members.setdefault(identity.key(), []).append(name)
    assert {b.key for b in t.buckets} == set(members) and len(t.buckets) <= len(cases)
    for b in t.buckets:
        mine = [cases[name] for name in members[b.key]]
        c = cases[b.repro.name]
        assert b.repro.name in members[b.key]
        assert b.count == sum(m["hits"] for m in mine) and b.first_seen == min(m["found"] for m in mine)
        assert b.repro_size == len(c["graph"]["nodes"]) == min(len(m["graph"]["nodes"]) for m in mine)
        assert b.flaky == (c["verification"]["status"] == "flaky")
    # A repro that flakes when verified in fresh processes makes its bucket flaky.
    victim = root / sorted(cases)[0] / "case.json"
    data = json.loads(victim.read_text())
    data["verification"]["status"] = "flaky"
    victim.write_text(json.dumps(data))
    assert [b.flaky for b in load(root).buckets if b.repro.name == victim.parent.name] == [True]


def test_order_most_distinct_first(tmp_path):
    root = _committed_minimized(tmp_path)
    # One reproducible mismatch marked flaky, as verification marks one that flakes in fresh
    # processes: the committed corpus need not hold a flaky repro (its one was a duplicate, folded).
    victim = next(d / "case.json" for d in sorted(root.iterdir())
                  if (d / "case.json").is_file() and json.loads((d / "case.json").read_text())["outcome"] == "mismatch")
    data = json.loads(victim.read_text())
    data["verification"]["status"] = "flaky"
    victim.write_text(json.dumps(data))
    t = load(root)
    pos = {b.key: i for i, b in enumerate(t.buckets)}
    # Reproducible buckets, ordered by tier (flaky ones come after all of them: rule 2).
    steady = [b for b in t.buckets if not b.flaky]
    located = [b for b in steady if b.outcome == "crash" and ".cpp:" in b.signature.location]
    generic = [b for b in steady if b.outcome == "crash" and not b.signature.location]
    mismatches = [b for b in steady if b.outcome == "mismatch"]
    deaths = [b for b in steady if b.outcome == "hard-crash"]
    flaky = [b for b in t.buckets if b.flaky and b.outcome != "unfused"]
    assert flaky and min(pos[b.key] for b in flaky) > max(pos[b.key] for b in steady if b.outcome != "unfused")
    assert located and generic and mismatches and deaths
    assert max(pos[b.key] for b in located) < min(pos[b.key] for b in deaths + mismatches + generic)
    assert max(pos[b.key] for b in deaths) < min(pos[b.key] for b in mismatches)
    assert max(pos[b.key] for b in mismatches) < min(pos[b.key] for b in generic)
    assert [b.outcome for b in t.buckets][-1] == "unfused"
    # Among generic crashes, a backend/kind/location shared by fewer buckets comes first: NNC's
    # few message-only RuntimeErrors before oneDNN's many.
    assert [b.combo for b in generic] == sorted(b.combo for b in generic)
    runtime = [b.backend for b in generic if b.signature.kind == "RuntimeError"]
    nnc = [i for i, name in enumerate(runtime) if name == "torchscript:nnc"]
    onednn = [i for i, name in enumerate(runtime) if name == "torchscript:onednn"]
    assert nnc and len(nnc) < len(onednn) and max(nnc) < min(onednn)
    # Rare before frequent, all else equal.
    a, b = (Bucket(x.key, x.signature, count=n) for x, n in zip(mismatches[:2], (9, 1)))
    assert [x.count for x in order([a, b])] == [1, 9]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "fuzzfuse", "triage", *map(str, args)], capture_output=True,
                          text=True, timeout=300, cwd=REPO)


@pytest.mark.slow
def test_cli_table_report_and_bad_input(shards, tmp_path):
    root, summaries = shards
    r = _cli(root, "--report", tmp_path / "r.html")
    assert r.returncode == 0, r.stderr
    assert f"{len(_entries(summaries))} buckets" in r.stdout and "report:" in r.stdout
    assert "no-fusion" in r.stdout and (tmp_path / "r.html").is_file()
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "x.json").write_text("{not json")
    r = _cli(tmp_path / "junk")  # a corrupt case and nothing else: nothing to triage
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("fuzzfuse: error:")
    (tmp_path / "empty").mkdir()
    for bad in (tmp_path / "missing", tmp_path / "empty"):
        with pytest.raises(TriageError):
            load(bad)


# ---- the HTML report in a real browser -------------------------------------------------------
class _Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def _chromium(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                           "--no-first-run", "--disable-background-networking", "--disable-component-update",
                           "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=180)


def _png_stats(path: Path) -> tuple[int, int, int]:
    """Width, height, and how many distinct byte values the decompressed image data holds (a
    one-colour page filters to a handful): enough to tell a blank page from a drawn one."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            size = struct.unpack(">II", chunk[:8])
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    return size[0], size[1], len(set(zlib.decompress(idat)))


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (apt-get install -y chromium)")
def test_report_renders_in_chromium(shards, tmp_path):
    shard_root, _ = shards
    root = Path(shutil.copytree(shard_root, tmp_path / "campaign"))
    # A third host whose compiler message is hostile HTML: it must show as text, never as markup.
    hostile = root / "shards" / "c"
    shutil.copytree(root / "shards" / "a", hostile)
    summary = json.loads((hostile / "summary.json").read_text())
    sig = {**summary["signatures"][0]["signature"], "outcome": "crash", "message": HOSTILE}
    summary["signatures"][0].update(signature=sig, key=Signature.from_json(sig).key(), detail=HOSTILE)
    (hostile / "summary.json").write_text(json.dumps(summary))
    t = load(root)
    report = write_report(t)
    assert report == root / "report.html"

    dom = _chromium(tmp_path, "--dump-dom", report.as_uri())
    assert dom.returncode == 0 and "</html>" in dom.stdout, dom.stderr[-2000:]
    page = _Dom()
    page.feed(dom.stdout)
    text = "".join(page.text)
    classes = [(tag, a.get("class", "")) for tag, a in page.tags]
    assert not any(tag == "script" for tag, _ in page.tags) and HOSTILE in text
    assert all(b.key in text for b in t.buckets)
    assert classes.count(("article", "bucket")) == len(t.buckets)
    assert classes.count(("svg", "graph")) == sum(b.smallest[0] is not None for b in t.buckets)
    assert classes.count(("svg", "chart")) >= 3  # cases and signatures over time, outcomes
    assert classes.count(("polyline", "series")) >= 2 * len(t.runs)
    assert sum(tag == "text" for tag, _ in page.tags) > 10 * len(t.buckets)  # op names, shapes, dtypes
    links = [a["href"] for tag, a in page.tags if tag == "a" and not a["href"].startswith("#")]
    assert any(h.endswith("repro.py") for h in links)
    assert all((root / unquote(h)).is_file() for h in links), "a link in the report points nowhere"
    assert not any(h.startswith(("http:", "https:", "//")) for tag, a in page.tags for h in
                   (a.get("href", ""), a.get("src", "")))  # self-contained: nothing from the network

    shot = tmp_path / "report.png"
    r = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1280,2000", report.as_uri())
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    width, height, distinct = _png_stats(shot)
    assert (width, height) == (1280, 2000)
    assert shot.stat().st_size > 40_000 and distinct > 64, "the screenshot is (nearly) blank"
