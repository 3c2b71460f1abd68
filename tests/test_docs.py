"""The README and docs/ hold together: every relative link in README.md and docs/*.md names a file
that exists (and, with a #fragment, a heading of that file), every page of docs/ is linked from the
README, the README stays short, and its Quickstart commands (the campaign that
tests/test_first_run.py runs, the fast tests, and the full test command that .ci/run runs) are
still there. Plain text only: no torch import."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS, *[p for p in [ROOT / "CHANGELOG.md"] if p.exists()]]
MAX_README_LINES = 250

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets are not links."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(path: Path) -> list[str]:
    """Each relative link of `path` whose file, or whose #heading in that file, does not exist."""
    broken = []
    for target in LINK.findall(_prose(path.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and (dest.suffix != ".md" or fragment not in anchors(dest)):
            broken.append(f"{target}: no such heading")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves(page):
    assert broken_links(page) == []


def test_a_broken_link_or_anchor_is_caught(tmp_path):
    (tmp_path / "a.md").write_text("# A page\n\n## Its part: one\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md) [ok](a.md#its-part-one) [ok](#here) `[code](x.md)`\n\n"
                    "```\n[block](y.md)\n```\n\n## Here\n\n[gone](missing.md) [gone](a.md#nowhere) [web](https://x.y)\n")
    assert broken_links(page) == ["missing.md: no such file", "a.md#nowhere: no such heading"]


def test_slug_follows_github():
    assert slug("In a campaign: reduce, then dedup") == "in-a-campaign-reduce-then-dedup"
    assert slug("Backward (training) cases") == "backward-training-cases"
    assert slug("Still a bug? Every repro against every version") == "still-a-bug-every-repro-against-every-version"
    assert slug("Using `graphs()` here") == "using-graphs-here"


def test_the_docs_exist_and_the_readme_links_every_page():
    assert DOCS, "docs/ holds no pages"
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in LINK.findall(_prose(README.read_text()))}
    assert [str(d.relative_to(ROOT)) for d in DOCS if d.resolve() not in linked] == []


def test_the_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_the_readmes_quickstart_commands_are_still_there():
    """Found as tests/test_first_run.py and .ci/run find them: the full test command is the line that
    starts `python3 -m pytest` and names `--fuzzfuse-corpus minimized`, and .ci/run runs it."""
    lines = README.read_text().splitlines()
    full = [l for l in lines if l.startswith("python3 -m pytest") and "--fuzzfuse-corpus minimized" in l]
    assert full == ["python3 -m pytest -q -n auto --fuzzfuse-corpus minimized"]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert f'"$VENV/bin/python"{full[0].removeprefix("python3")}' in ci
    assert 'python3 -m pytest -q -m "not slow" -n auto' in lines
    campaign = [l for l in lines if "fuzzfuse fuzz" in l and "pip install" in l]
    assert len(campaign) == 1 and campaign[0].startswith("python3 -m pip install torch==2.13.0 && ")
    assert "--time" in campaign[0] and "--out" in campaign[0]
