"""The triage as one static HTML page: no server, no network, no script, inline CSS and SVG only, so
it can be mailed, attached to a bug, or opened from a CI artifact. Every piece of text is
HTML-escaped: signatures quote compiler messages, which hold `<`, `&` and quotes."""
from __future__ import annotations

import math
import os
import re
import time
from html import escape
from pathlib import Path
from urllib.parse import quote

import networkx as nx

from .corpus import CorpusError, load_case
from .ir import Graph, TensorInput, to_source
from .triage import Bucket, Triage, when

PALETTE = ("#2563eb", "#ea580c", "#16a34a", "#9333ea", "#0891b2", "#be185d", "#4d7c0f", "#b45309")
OUTCOME_COLOR = {"crash": "#dc2626", "hard-crash": "#991b1b", "hang": "#7c3aed", "mismatch": "#d97706",
                 "unfused": "#6b7280", "flaky": "#0891b2", "pass": "#16a34a", "invalid": "#9ca3af",
                 "unsupported": "#a8a29e"}
CHAR_PX, LINE_PX = 6.7, 14  # the graphs' 11px monospace text: advance per character, line height
DETAIL_CHARS, EXCERPT_LINES = 2000, 24


def esc(x) -> str:
    return escape(str(x), quote=True)


def href(path: Path, base: Path) -> str:
    """A link relative to the report's own directory, so the page and its files move together."""
    return esc(quote(os.path.relpath(Path(path).resolve(), Path(base).resolve()).replace(os.sep, "/")))


# ---- graphs ----------------------------------------------------------------------------------
def _type(vt) -> str:
    return vt.dtype if vt.is_scalar else f"{vt.dtype}[{','.join(map(str, vt.shape))}]"


def _clip(s: str, n: int = 44) -> str:
    return s if len(s) <= n else s[:n - 1] + "…"


def _labels(graph: Graph) -> dict[str, tuple[str, list[str]]]:
    """Per value: its kind (input/op/output) and text lines: names, op and arguments, attributes,
    and the static shape/dtype the registry infers."""
    types = graph.infer_types()
    out = {}
    for i in graph.inputs:
        if isinstance(i, TensorInput):
            lines = [i.name, _type(i.type)] + ([i.layout.kind] if i.layout.kind != "contiguous" else [])
        else:
            lines = [i.name, f"{i.dtype} = {i.value!r}"]
        out[i.name] = ("input", lines)
    for n in graph.nodes:
        args = ", ".join(a if isinstance(a, str) else repr(a) for a in n.args)
        lines = [_clip(f"{n.name} = {n.op}({args})")]
        if n.attrs:
            lines.append(_clip(", ".join(f"{k}={v}" for k, v in sorted(n.attrs.items()))))
        lines.append(_type(types[n.name]))
        out[n.name] = ("output" if n.name in graph.outputs else "op", lines)
    return out


def graph_svg(graph: Graph) -> str:
    """A left-to-right layered drawing: one column per topological generation (networkx), nodes in
    a column ordered by the mean row of their operands to keep edges short and straight."""
    g = graph.to_networkx()
    labels = _labels(graph)
    input_order = {i.name: k for k, i in enumerate(graph.inputs)}
    columns: list[list[str]] = []
    row: dict[str, float] = {}

    def bary(n: str) -> float:
        preds = list(g.predecessors(n))
        return sum(row[p] for p in preds) / len(preds) if preds else input_order.get(n, 0)

    for layer in nx.topological_generations(g):
        layer = sorted(layer, key=lambda n: (bary(n), n))
        row.update((n, float(k)) for k, n in enumerate(layer))
        columns.append(layer)
    size = {n: (max(len(s) for s in lines) * CHAR_PX + 16, len(lines) * LINE_PX + 10)
            for n, (_, lines) in labels.items()}
    gap_x, gap_y, pad = 36, 14, 8
    heights = [sum(size[n][1] for n in col) + gap_y * (len(col) - 1) for col in columns]
    total_h = max(heights) + 2 * pad
    pos: dict[str, tuple[float, float]] = {}
    x = pad
    for col, h in zip(columns, heights):
        width = max(size[n][0] for n in col)
        y = (total_h - h) / 2
        for n in col:
            pos[n] = (x + (width - size[n][0]) / 2, y)
            y += size[n][1] + gap_y
        x += width + gap_x
    total_w = x - gap_x + pad
    parts = [f'<svg class="graph" xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{total_h:.0f}" '
             f'viewBox="0 0 {total_w:.0f} {total_h:.0f}" role="img" aria-label="minimized graph">']
    for a, b in g.edges:
        (xa, ya), (xb, yb) = pos[a], pos[b]
        x1, y1, x2, y2 = xa + size[a][0], ya + size[a][1] / 2, xb - 2, yb + size[b][1] / 2
        mid = (x1 + x2) / 2
        parts.append(f'<path class="edge" d="M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} {mid:.1f},{y2:.1f} '
                     f'{x2:.1f},{y2:.1f}" marker-end="url(#arrow)"/>')
    for n, (kind, lines) in labels.items():
        (x, y), (w, h) = pos[n], size[n]
        parts.append(f'<g class="node {kind}"><title>{esc(chr(10).join(lines))}</title>'
                     f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="5"/>')
        for k, line in enumerate(lines):
            cls = ' class="head"' if k == 0 else ""
            parts.append(f'<text x="{x + 8:.1f}" y="{y + 5 + LINE_PX * (k + 0.8):.1f}"{cls}>{esc(line)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


# ---- charts ----------------------------------------------------------------------------------
def _ticks(top: float, n: int = 4, integer: bool = False) -> list[float]:
    """Round ticks from 0 to at least `top`; for counts (`integer`), whole numbers only."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / n
    mag = 10 ** math.floor(math.log10(raw))
    steps = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    step = next(m * mag for m in steps if m * mag >= raw)
    if integer:
        step = max(1, round(step))
    return [step * k for k in range(int(math.ceil(top / step - 1e-9)) + 1)]


TIME_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def _time_ticks(top: float) -> tuple[list[float], list[str]]:
    """Round ticks in the largest unit that fits twice: 0, 10m, 20m... rather than 16.67m."""
    unit, size = next((u, n) for u, n in TIME_UNITS if top >= 2 * n or n == 1)
    ticks = _ticks(top / size)
    return [x * size for x in ticks], [f"{x:g}{unit}" for x in ticks]


def line_chart(series: list[tuple[str, str, list[tuple[float, float]]]], ylabel: str) -> str:
    """Polylines of (seconds, value) points, with their legend."""
    series = [s for s in series if s[2]]
    if not series:
        return '<p class="empty">no timeline here (no summary.json with one)</p>'
    w, h, left, right, top, bottom = 560, 230, 48, 14, 12, 34
    xs, xlabels = _time_ticks(max(x for _, _, pts in series for x, _ in pts) or 1)
    ys = _ticks(1.05 * max(y for _, _, pts in series for _, y in pts) or 1, integer=True)  # counts
    sx = lambda x: left + (w - left - right) * x / xs[-1]  # noqa: E731
    sy = lambda y: h - bottom - (h - top - bottom) * y / ys[-1]  # noqa: E731
    parts = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">']
    for y in ys:
        parts.append(f'<line class="grid" x1="{left}" x2="{w - right}" y1="{sy(y):.1f}" y2="{sy(y):.1f}"/>'
                     f'<text class="tick" x="{left - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
    for x, label in zip(xs, xlabels):
        parts.append(f'<text class="tick" x="{sx(x):.1f}" y="{h - bottom + 16}" text-anchor="middle">'
                     f'{esc(label)}</text>')
    parts.append(f'<text class="axis" x="{w - right}" y="{h - 4}" text-anchor="end">'
                 f'time since the first start</text>'
                 f'<text class="axis" x="{left}" y="{top - 2}" text-anchor="start">{esc(ylabel)}</text>')
    legend = []
    for name, color, pts in series:
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline class="series" points="{coords}" stroke="{color}">'
                     f'<title>{esc(name)}</title></polyline>')
        legend.append(f'<span><i style="background:{color}"></i>{esc(name)}</span>')
    parts.append("</svg>")
    return "".join(parts) + f'<div class="legend">{"".join(legend)}</div>'


def bar_chart(counts: dict, colors: dict | None = None, empty: str = "nothing recorded") -> str:
    items = sorted(((k, v) for k, v in counts.items() if v), key=lambda kv: (-kv[1], kv[0]))
    if not items:
        return f'<p class="empty">{esc(empty)}</p>'
    w, label_w, row = 560, 150, 24
    h = row * len(items) + 8
    top = max(v for _, v in items)
    parts = [f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}">']
    for k, (name, v) in enumerate(items):
        y = 4 + k * row
        bw = max(2.0, (w - label_w - 70) * v / top)
        color = (colors or {}).get(name, PALETTE[k % len(PALETTE)])
        parts.append(f'<text class="tick" x="{label_w - 8}" y="{y + 15}" text-anchor="end">'
                     f'{esc(_clip(str(name), 24))}</text><rect class="bar" x="{label_w}" y="{y + 3}" '
                     f'width="{bw:.1f}" height="{row - 8}" fill="{color}" rx="3"><title>{esc(name)}: {v}</title></rect>'
                     f'<text class="value" x="{label_w + bw + 6:.1f}" y="{y + 15}">{v}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _steps(times: list[float], end: float) -> list[tuple[float, float]]:
    """A running count of events as a staircase from 0 to `end`: flat while nothing happens."""
    points = [(0.0, 0)]
    for k, x in enumerate(sorted(times)):
        points += [(x, k), (x, k + 1)]
    return points + [(max(end, points[-1][0]), len(times))]


def _run_name(t: Triage, name: str) -> str:
    """A shard's directory under the root, or the root's own name for a campaign at the top."""
    return t.root.resolve().name if name == "." else name


def _timelines(t: Triage) -> tuple[str, str]:
    """Cases and distinct signatures over wall-clock time since the first start. Each campaign's
    timeline holds [seconds since its first start, cases, signatures] at each checkpoint; a line
    starts at 0 at its start and then follows its samples."""
    starts = [r.start for r in t.runs if r.start] + [b.first_seen for b in t.buckets if b.first_seen] + t.saved
    if not starts:
        return line_chart([], ""), line_chart([], "")
    t0 = min(starts)
    end = max([r.start - t0 + r.seconds for r in t.runs if r.start] + [x - t0 for x in t.saved] +
              [b.last_seen - t0 for b in t.buckets if b.last_seen])
    cases, sigs = [], []
    if t.saved:  # cases outside any campaign summary: only when each was found is known
        cases.append(("failing cases saved (no summary)", PALETTE[-1], _steps([x - t0 for x in t.saved], end)))
    events = []
    for k, r in enumerate(t.runs):
        if not r.start or not r.timeline:
            continue
        color = PALETTE[k % len(PALETTE)]
        base, name = r.start - t0, _run_name(t, r.name)
        cases.append((name, color, [(base, 0)] + [(base + p[0], p[1]) for p in r.timeline]))
        sigs.append((name, color, [(base, 0)] + [(base + p[0], p[2]) for p in r.timeline]))
        events += [(base, k, 0)] + [(base + p[0], k, p[1]) for p in r.timeline]
    if len(t.runs) > 1:  # all shards together: the sum of each shard's latest count
        latest, total = {}, []
        for x, k, n in sorted(events):
            latest[k] = n
            total.append((x, sum(latest.values())))
        cases.insert(0, ("all shards", "#111827", [(0, 0)] + total))
    seen = [b.first_seen - t0 for b in t.buckets if b.first_seen]
    if seen:  # merged by key: a signature two shards both found counts once
        sigs.insert(0, ("all (merged by key)", "#111827", _steps(seen, end)))
    return line_chart(cases, "cases"), line_chart(sigs, "distinct signatures")


# ---- page ------------------------------------------------------------------------------------
def _excerpt(repro: Path) -> str:
    """The repro's graph function (what a fuser developer reads first), else its first lines."""
    try:
        lines = repro.read_text().splitlines()
    except OSError:
        return ""
    start = next((k for k, s in enumerate(lines) if s.startswith("def fn(")), 0)
    end = next((k for k in range(start, len(lines)) if not lines[k].strip()), len(lines))
    return "\n".join(lines[start:min(end, start + EXCERPT_LINES)])


def _bucket_html(i: int, b: Bucket, base: Path) -> str:
    path, size = b.smallest
    drawing, code, reduction, detail = '<p class="empty">no saved case for this bucket</p>', "", "", b.detail
    if path is not None:
        try:
            case = load_case(path)
            detail = case.detail or detail  # the failure of the case drawn, not of another shard's
            drawing = graph_svg(case.graph)
            code = _excerpt(b.repro / "repro.py") if b.repro is not None else to_source(case.graph)
            if case.reduction is not None and case.reduction.ops_before is not None:
                reduction = f" (minimized from {case.reduction.ops_before})"
        except (CorpusError, KeyError, ValueError) as e:
            drawing = f'<p class="empty">graph unavailable: {esc(e)}</p>'
    color = OUTCOME_COLOR.get(b.outcome, "#374151")
    badges = f'<span class="badge" style="background:{color}">{esc(b.outcome)}</span>'
    if b.flaky:
        badges += '<span class="badge" style="background:#0891b2">flaky</span>'
    links = []
    if b.repro is not None:
        links.append(f'<a href="{href(b.repro / "repro.py", base)}">repro.py</a>')
        links.append(f'<a href="{href(b.repro / "README.md", base)}">bug report</a>')
    if path is not None:
        links.append(f'<a href="{href(path, base)}">case.json</a>')
    shards = ", ".join(sorted("(top level)" if d == "." else d for d in b.shards)) or "-"
    facts = [("hits", b.count), ("shards", shards), ("first seen", when(b.first_seen)),
             *([("fused vs eager", _values(detail))] if b.outcome == "mismatch" and _values(detail) else []),
             ("last seen", when(b.last_seen)), ("smallest", f"{size if size is not None else '?'} ops{reduction}"),
             ("repro verified", b.verification or "-"), ("files", " · ".join(links) or "-")]
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{v if k == 'files' else esc(v)}</dd>" for k, v in facts)
    detail = detail[:DETAIL_CHARS] + ("\n…" if len(detail) > DETAIL_CHARS else "")
    return (f'<article class="bucket" id="b{i}"><header><span class="rank">#{i}</span>{badges}'
            f'<span class="backend">{esc(b.backend)}</span><span class="tier">{esc(_why(b))}</span></header>'
            f'<code class="key">{esc(b.key)}</code><div class="body"><div class="drawing">{drawing}</div>'
            f'<div class="facts"><dl>{dl}</dl></div></div>'
            f'<div class="texts"><div><h4>detail</h4><pre>{esc(detail) or "-"}</pre></div>'
            f'<div><h4>{"repro.py (graph function)" if b.repro is not None else "graph source"}</h4>'
            f'<pre>{esc(code) or "-"}</pre></div></div></article>')


MISMATCH_VALUES = re.compile(r"(?:e\.g\. (\([^)]*\)): )?fused (\S+?);? eager (\S+?);?(?: fp64 (\S+?);?)?(?:\s|$)")


def _values(detail: str) -> str:
    """A mismatch's values as the oracle wrote them in the detail ("e.g. (0, 1): fused nan eager
    inf fp64 inf", or a float's "worst element fused 0.99 eager -0.0006 fp64 -0.0006"): the last
    such triple of the first line, what a fuser developer looks for first."""
    found = list(MISMATCH_VALUES.finditer(detail.splitlines()[0] if detail else ""))
    if not found:
        return ""
    at, fused, eager, fp64 = found[-1].groups()
    return f"fused {fused}, eager {eager}" + (f", float64 {fp64}" if fp64 else "") + (f" at {at}" if at else "")


def _why(b: Bucket) -> str:
    tier = ("crash at a source location", "process death or hang", "wrong result", "generic crash message")
    if b.outcome == "unfused":
        return "coverage: nothing fused"
    combo = "unique backend/kind/location" if b.combo == 1 else f"{b.combo} buckets share backend/kind/location"
    return f"{tier[b.tier]} · {combo}"


def _summed(dicts) -> dict:
    total: dict = {}
    for d in dicts:
        for k, v in d.items():
            total[k] = total.get(k, 0) + v
    return total


def _index_row(i: int, b: Bucket) -> str:
    dot = f'<span class="dot" style="background:{OUTCOME_COLOR.get(b.outcome, "#374151")}"></span>'
    size = b.smallest[1]
    return (f'<tr><td class="num"><a href="#b{i}">{i}</a></td><td class="oc">{dot}{esc(b.outcome)}'
            f'{" <em>flaky</em>" if b.flaky else ""}</td><td>{esc(b.backend)}</td><td class="num">{b.count}</td>'
            f'<td class="num">{esc(size if size is not None else "-")}</td>'
            f'<td class="sig"><a href="#b{i}">{esc(b.tail)}</a></td></tr>')


def render(t: Triage, base: Path | None = None) -> str:
    """The page; links are relative to `base`, the directory it will be written to (default: the root)."""
    cases_chart, sigs_chart = _timelines(t)
    if t.runs:
        outcomes, outcomes_title = _summed(r.outcomes for r in t.runs), "Outcomes"
    else:
        outcomes = _summed({"flaky" if b.flaky else b.outcome: b.count} for b in t.buckets)
        outcomes_title = "Outcomes (failing hits, from saved cases)"
    coverage = bar_chart(_summed(r.coverage for r in t.runs),
                         empty="no scheduler coverage recorded (only nvFuser reports its schedulers)")
    stats = [("buckets", len(t.buckets)),
             ("bugs (reproducible)", sum(b.outcome != "unfused" and not b.flaky for b in t.buckets)),
             ("flaky", sum(b.flaky for b in t.buckets)), ("failing hits", sum(b.count for b in t.buckets if b.outcome != "unfused")),
             ("cases run", t.cases if t.runs else "-"), ("campaigns", len(t.runs))]
    stats_html = "".join(f'<div class="stat"><b>{esc(v)}</b><span>{esc(k)}</span></div>' for k, v in stats)
    backends = ", ".join(sorted({b.backend for b in t.buckets})) or "-"
    rows = "".join(_index_row(i, b) for i, b in enumerate(t.buckets, 1))
    problems = "".join(f"<li>{esc(p)}</li>" for p in t.problems)
    problems = f'<h3>Skipped files</h3><ul class="problems">{problems}</ul>' if problems else ""
    buckets = "".join(_bucket_html(i, b, base or t.root) for i, b in enumerate(t.buckets, 1))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>fuzzfuse triage: {esc(t.root.resolve().name)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head><body>
<svg width="0" height="0" style="position:absolute"><defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5"
 markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#64748b"/></marker></defs></svg>
<header class="top"><h1>fuzzfuse triage</h1><p class="sub">{esc(t.root.resolve())} · generated
 {esc(when(time.time()))} · backends: {esc(backends)}</p><div class="stats">{stats_html}</div></header>
<section class="panels">
<div class="panel"><h3>Cases over time</h3>{cases_chart}</div>
<div class="panel"><h3>Distinct signatures over time</h3>{sigs_chart}</div>
<div class="panel"><h3>{outcomes_title}</h3>{bar_chart(outcomes, OUTCOME_COLOR)}</div>
<div class="panel"><h3>Scheduler coverage</h3>{coverage}</div>
</section>
<section class="index"><h2>Buckets, most distinct first</h2><p class="note">Order: real bugs before
<code>unfused</code> coverage; reproducible before flaky; a crash at a source location (assert file:line),
then process deaths and hangs, then mismatches, then crashes known only by a message; then
backend/kind/location combinations shared by fewer buckets; then fewer hits.</p>
<table><thead><tr><th>#</th><th>outcome</th><th>backend</th><th>hits</th><th>ops</th>
<th>stage | kind | location | message</th></tr></thead><tbody>{rows}</tbody></table>{problems}</section>
<section class="buckets">{buckets}</section>
</body></html>
"""


def write_report(t: Triage, path: Path | None = None) -> Path:
    from .corpus import atomic_write

    path = Path(path) if path is not None else t.root / "report.html"
    atomic_write(path, render(t, path.parent))
    return path


CSS = """
body{margin:0;background:#f4f5f7;color:#1f2937;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
header.top,section{max-width:1220px;margin:0 auto;padding:0 20px}
h1{margin:18px 0 2px;font-size:26px}h2{font-size:19px;margin:22px 0 6px}h3{font-size:14px;margin:0 0 8px;color:#374151}
h4{margin:6px 0 4px;font-size:12px;color:#6b7280;text-transform:uppercase;letter-spacing:.04em}
.sub{margin:0 0 12px;color:#6b7280;font-size:13px;word-break:break-all}
.stats{display:flex;flex-wrap:wrap;gap:10px;margin-bottom:16px}
.stat{background:#fff;border:1px solid #e5e7eb;border-radius:8px;padding:8px 14px;min-width:90px}
.stat b{display:block;font-size:20px}.stat span{color:#6b7280;font-size:12px}
.panels{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:14px}
.panel,.bucket,.index table{background:#fff;border:1px solid #e5e7eb;border-radius:8px}
.panel{padding:12px 14px}.panel svg{max-width:100%;height:auto}
.grid{stroke:#e5e7eb}.tick{font-size:11px;fill:#6b7280}.axis{font-size:11px;fill:#374151}.value{font-size:11px;fill:#111827}
.series{fill:none;stroke-width:2.2;stroke-linejoin:round}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;color:#374151}
.legend i{display:inline-block;width:12px;height:3px;margin-right:5px;vertical-align:middle}
.empty{color:#9ca3af;font-style:italic;margin:8px 0}
.note{color:#4b5563;font-size:13px;margin:0 0 10px}
.index table{border-collapse:collapse;width:100%;font-size:13px}
.index th{text-align:left;background:#f9fafb;color:#4b5563;font-weight:600}
.index th,.index td{padding:5px 8px;border-bottom:1px solid #f0f1f3;vertical-align:top}
.index td.num{text-align:right}.index td.oc{white-space:nowrap}
.index td.sig{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px;word-break:break-word}
.index em{color:#0891b2;font-style:normal;font-weight:600}
a{color:#1d4ed8;text-decoration:none}a:hover{text-decoration:underline}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin-right:6px}
.bucket{margin:14px 0;padding:12px 14px}
.bucket header{display:flex;align-items:center;gap:8px;flex-wrap:wrap}
.rank{font-weight:700;font-size:16px;color:#111827}.backend{font-weight:600}.tier{color:#6b7280;font-size:12px}
.badge{color:#fff;border-radius:10px;padding:1px 9px;font-size:12px;font-weight:600}
code.key{display:block;margin:8px 0;padding:6px 8px;background:#f8fafc;border:1px solid #e2e8f0;border-radius:5px;
 font:12px ui-monospace,Menlo,Consolas,monospace;word-break:break-all}
.body{display:flex;gap:16px;align-items:flex-start;flex-wrap:wrap}.drawing{flex:1 1 520px;overflow-x:auto}
.facts{flex:0 1 380px}.facts dl{display:grid;grid-template-columns:auto 1fr;gap:2px 12px;margin:0;font-size:13px}
.facts dt{color:#6b7280}.facts dd{margin:0;word-break:break-word}
.texts{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:14px}
pre{margin:0;padding:8px;background:#f8fafc;border:1px solid #e2e8f0;border-radius:5px;max-height:230px;overflow:auto;
 font:11.5px/1.4 ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;word-break:break-word}
svg.graph{display:block}svg.graph text{font:11px ui-monospace,Menlo,Consolas,monospace;fill:#1f2937}
svg.graph text.head{font-weight:700}
.node rect{fill:#fff;stroke:#94a3b8;stroke-width:1.2}.node.input rect{fill:#eff6ff;stroke:#60a5fa}
.node.output rect{fill:#fff7ed;stroke:#f97316;stroke-width:2}.edge{fill:none;stroke:#64748b;stroke-width:1.3}
.problems{color:#92400e;font-size:12px}
@media (max-width:900px){.panels,.texts{grid-template-columns:1fr}}
"""
