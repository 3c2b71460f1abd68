"""Reduce, then dedup: the campaign's book of root causes (fuzzfuse.dedup)."""
from fuzzfuse.identity import root_cause_key
from fuzzfuse.dedup import RootCauseBook, tally
from fuzzfuse.ir import Graph
from fuzzfuse.oracle import Signature
from fuzzfuse.verdict import MinimizedRepro, Outcome, Reproduction, Verification

MISMATCH = Signature("mismatch", "torchscript:nnc", "run", "values", "float")
ASSERT = Signature("crash", "nvfuser", "compile", "RuntimeError", "csrc/ir/internal_nodes.cpp:698",
                   "INTERNAL ASSERT FAILED Unexpected operator type silu in T")


def graph(*ops: str, dtype: str = "float32") -> Graph:
    """x0 -> op -> op ... as a chain."""
    nodes, prev = [], "x0"
    for k, op in enumerate(ops):
        nodes.append({"name": f"v{k}", "op": op, "args": [prev], "attrs": {}})
        prev = f"v{k}"
    return Graph.from_json({"schema": 1, "outputs": [prev], "nodes": nodes, "inputs": [
        {"kind": "tensor", "name": "x0", "shape": [4], "dtype": dtype, "layout": {"kind": "contiguous"},
         "values": {"dist": "normal", "seed": 1}}]})


def test_an_anchored_crash_has_its_root_cause_at_once_and_is_known_by_it():
    other_op = Signature(**{**ASSERT.to_json(), "message": "INTERNAL ASSERT FAILED Unexpected operator type isnan in T"})
    book = RootCauseBook({root_cause_key(ASSERT): "minimized/silu"})
    cause = book.offer(other_op, graph("isnan", "exp"), "corpus/a.json")
    assert cause is not None and cause.known == "minimized/silu" and not book.pending


def test_a_mismatch_is_pending_never_known_until_its_reduction_names_it():
    reduced = graph("frac")
    book = RootCauseBook({root_cause_key(MISMATCH, reduced): "minimized/frac"})
    hit = graph("exp", "frac", "sin")
    assert book.offer(MISMATCH, hit, "corpus/a.json") is None
    assert not book.causes and len(book.pending) == 1
    cause = book.settle(book.pending[0], MISMATCH, reduced, "reducing/a.json")
    assert cause.known == "minimized/frac" and cause.trigger == ["frac"] and not book.pending


def test_two_reductions_of_one_coarse_bucket_can_be_two_root_causes():
    book = RootCauseBook()
    for case in ("a", "b"):
        book.offer(MISMATCH, graph("exp", "frac", "log1p"), f"corpus/{case}.json")
    first = book.settle(book.pending[0], MISMATCH, graph("frac"))
    second = book.settle(book.pending[0], MISMATCH, graph("log1p"))
    assert first.key != second.key and first.new and second.new
    assert first.coarse_keys == second.coarse_keys == [MISMATCH.key()]


def test_hits_that_hold_no_trigger_of_their_bucket_are_reduced_first():
    book = RootCauseBook()
    book.offer(MISMATCH, graph("exp", "frac"), "corpus/done.json")
    book.settle(book.pending[0], MISMATCH, graph("frac"))
    book.offer(MISMATCH, graph("frac", "sin"), "corpus/small-but-same.json")
    book.offer(MISMATCH, graph("exp", "log1p", "sin", "cos"), "corpus/new.json")
    assert book.next_to_reduce().case == "corpus/new.json"


def test_a_hang_is_reduced_after_the_other_new_hits_even_when_smaller():
    hang = Signature("hang", "inductor", "run", "timeout")
    book = RootCauseBook()
    book.offer(hang, graph("exp"), "corpus/hang.json")
    book.offer(MISMATCH, graph("exp", "log1p", "sin"), "corpus/mismatch.json")
    assert book.next_to_reduce().case == "corpus/mismatch.json"
    book.settle(book.pending[1], MISMATCH, graph("log1p"))
    assert book.next_to_reduce().case == "corpus/hang.json"


def test_a_hit_that_stopped_failing_is_dropped_not_guessed():
    book = RootCauseBook()
    book.offer(MISMATCH, graph("exp"), "corpus/a.json")
    assert book.settle(book.pending[0], MISMATCH, None) is None
    assert not book.causes and not book.pending


def test_the_book_round_trips_through_json_and_takes_the_known_repros_of_the_new_run():
    book = RootCauseBook()
    book.offer(ASSERT, graph("silu"), "corpus/a.json")
    book.offer(MISMATCH, graph("exp", "frac"), "corpus/b.json")
    again = RootCauseBook.from_json(book.to_json())
    again.know({root_cause_key(ASSERT): "minimized/silu"})
    assert [c.key for c in again.causes.values()] == [root_cause_key(ASSERT)]
    assert again.causes[root_cause_key(ASSERT)].known == "minimized/silu"
    assert again.pending == book.pending


def test_fold_keeps_one_repro_per_root_cause_and_known_counts_the_folded_variants(tmp_path):
    """Two repros of one nvFuser evaluator gap (the op name differs in the message) fold into the
    smaller one, which lists the other; --known then matches the folded one's signature too, and
    its identity."""
    from fuzzfuse.corpus import Case, load_case, write_json
    from fuzzfuse.fold import fold
    from fuzzfuse.known import known_repros

    isnan = Signature(**{**ASSERT.to_json(), "message": "INTERNAL ASSERT FAILED Unexpected operator type isnan in T"})
    other = Signature("crash", "nvfuser", "compile", "RuntimeError", "csrc/ops/alias.cpp:333", "Expected squeeze")
    for name, sig, g in [("silu", ASSERT, graph("silu")), ("isnan", isnan, graph("isnan", "exp")),
                         ("alias", other, graph("exp"))]:
        (tmp_path / name).mkdir()
        (tmp_path / name / "repro.py").write_text("")
        (tmp_path / name / "README.md").write_text(f"# {name}\n\nFound by fuzzfuse (seed 1), signature `?`; "
                                                     "seen 1 time(s).\n\n## Repro\n\n```python\n```\n")
        write_json(tmp_path / name / "case.json", Case(g, sig.backend, outcome=Outcome.CRASH, signature=sig,
                                                     verification=Verification(Reproduction.REPRODUCES)).to_json())
    # isnan as a directory split out in an earlier round of the same fold (`FoldReport.found_in`):
    # listed, and logged, under the name it was committed with
    report = fold(tmp_path, found_in={"isnan": "nvfuser-crash-isnan-committed"})
    assert report.folded == [("silu", ["nvfuser-crash-isnan-committed"])]
    assert not (report.moved or report.split or report.dropped)
    assert report.lines()[0] == "silu <- 1: nvfuser-crash-isnan-committed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alias", "silu"]
    kept = load_case(tmp_path / "silu" / "case.json")
    assert [v.key for v in kept.also_seen_as] == [isnan.key()] and kept.hits == 2
    readme = (tmp_path / "silu" / "README.md").read_text()
    assert "Seen 2 times." in readme and f"`{isnan.key()}`" in readme and "was `nvfuser-crash-isnan-committed`" in readme
    assert "seen 1 time(s)" not in readme  # the former wording is rewritten, not kept beside
    assert readme.index("**Also seen as**") < readme.index("## Repro")
    known = known_repros([str(tmp_path)])
    assert known.find(isnan.key()) == known.find(root_cause_key(isnan)) == str(tmp_path / "silu")
    assert known.find(root_cause_key(other)) == str(tmp_path / "alias")


def test_a_resumed_campaigns_book_keeps_the_campaigns_device():
    """A book read back from state.json records no device; the resumed campaign's reductions name
    theirs, so a wrong value found after --resume keys as before (it keyed with no device, and a
    CPU bug looked new against a CUDA one and known against nothing)."""
    from types import SimpleNamespace

    from fuzzfuse.dedup import RootCauseBook
    from fuzzfuse.known import KnownBugs
    from fuzzfuse.reductions import CampaignReductions

    campaign = SimpleNamespace(features=SimpleNamespace(device="cpu"))
    reductions = CampaignReductions(campaign, KnownBugs())
    saved = RootCauseBook.from_json(RootCauseBook(KnownBugs(), "cpu").to_json())
    assert saved.device == ""
    reductions.restore(saved, {})
    assert reductions.book.device == "cpu"


def test_a_new_bug_whose_repro_fails_in_no_fresh_process_is_unconfirmed_not_new():
    """An nvFuser campaign counted two such repros (a SIGSEGV and a wrong value that 0 of 3 fresh
    processes showed again) among its new root causes: a bug nobody can show is not filed."""
    book = RootCauseBook()
    for name, status in (("shown", Reproduction.REPRODUCES), ("lost", Reproduction.DOES_NOT_REPRODUCE),
                         ("sometimes", Reproduction.FLAKY)):
        book.offer(ASSERT.__class__(**{**ASSERT.to_json(), "location": f"csrc/{name}.cpp:1"}), graph("exp"),
                   f"corpus/{name}.json")
        cause = book.causes[max(book.causes, key=lambda k: book.causes[k].first_seen)]
        cause.record(MinimizedRepro(f"minimized/{name}", 3, 1, 10, 1.0, status))
    causes = list(book.causes.values())
    assert [c.new for c in causes] == [True, False, True]
    assert tally(causes) == "2 new, 0 known, 1 unconfirmed"
    again = RootCauseBook.from_json(book.to_json())
    assert [c.unconfirmed for c in again.causes.values()] == [False, True, False]
    repro = MinimizedRepro("minimized/lost", 3, 1, 10, 1.0, Reproduction.DOES_NOT_REPRODUCE)
    assert MinimizedRepro.from_json(repro.to_json()) == repro


def test_each_root_cause_says_where_it_stands_even_an_unconfirmed_crash_with_no_repro(tmp_path):
    """A crash keyed as seen whose re-runs never failed again is unconfirmed before any repro is
    written; the closing lines of an H100 nvFuser campaign raised TypeError on it (exit 1)."""
    book = RootCauseBook()
    for name in ("shown", "lost", "flaky-crash", "pending"):
        book.offer(ASSERT.__class__(**{**ASSERT.to_json(), "location": f"csrc/{name}.cpp:1"}), graph("exp"),
                   f"corpus/{name}.json")
    shown, lost, flaky, pending = sorted(book.causes.values(), key=lambda c: c.first_seen)
    shown.record(MinimizedRepro("minimized/shown", 3, 1, 10, 1.0, Reproduction.REPRODUCES))
    lost.record(MinimizedRepro("minimized/lost", 3, 1, 10, 1.0, Reproduction.DOES_NOT_REPRODUCE))
    flaky.unconfirmed = True
    assert shown.whereabouts(tmp_path) == f"new: {tmp_path / 'minimized/shown'}"
    assert lost.whereabouts(tmp_path) == f"unconfirmed (its repro did not fail again): {tmp_path / 'minimized/lost'}"
    assert flaky.whereabouts(tmp_path).startswith("unconfirmed (its case did not fail again")
    assert pending.whereabouts(tmp_path) == "new, not reduced yet"
    pending.known = "minimized/some-bug"
    assert pending.whereabouts(tmp_path) == "known: minimized/some-bug"


def test_a_corpus_listing_says_unconfirmed_for_a_repro_that_did_not_fail_again(tmp_path):
    import shutil
    from dataclasses import replace
    from pathlib import Path

    from fuzzfuse.corpus import load_case, write_json
    from fuzzfuse.known import compare_corpora

    source = Path(__file__).resolve().parent.parent / "minimized" / "nvfuser-mismatch-values-float-5aac8374"
    listed = {}
    for name, status in (("shown", Reproduction.REPRODUCES), ("lost", Reproduction.DOES_NOT_REPRODUCE)):
        found = tmp_path / name / source.name
        shutil.copytree(source, found)
        case = load_case(found / "case.json")
        write_json(found / "case.json", replace(case, verification=Verification(status, (0, 0, 0), runs=3)).to_json())
        [listed[name]] = compare_corpora([str(tmp_path / name)], [])
    assert listed["shown"].startswith("new      " + source.name)
    assert listed["lost"] == listed["shown"].replace("new     ", "unconfirmed", 1)


def test_a_new_cause_whose_repro_a_stopped_run_left_unwritten_is_reduced_again_on_resume():
    """An H100 nvFuser campaign reduced a misaligned-address crash to 2 ops, and its time ran out
    while the repro was verified: two resumes later it still said "new, not reduced yet". The hit
    the repro was written from is kept with the cause; a resumed book has it pending again, first
    in line, and its second reduction counts no second hit."""
    from types import SimpleNamespace

    from fuzzfuse.known import KnownBugs
    from fuzzfuse.reductions import CampaignReductions

    book = RootCauseBook(device="cpu")
    book.offer(MISMATCH, graph("exp", "frac", "sin"), "corpus/a.json")
    hit = book.pending[0]
    cause = book.settle(hit, MISMATCH, graph("frac"), "reduced/a.json")
    cause.writing_from = hit  # the campaign's reductions start writing its repro
    book.offer(MISMATCH, graph("exp", "log1p", "sin", "cos"), "corpus/novel.json")
    saved = RootCauseBook.from_json(book.to_json())
    reductions = CampaignReductions(SimpleNamespace(features=SimpleNamespace(device="cpu")), KnownBugs())
    reductions.restore(saved, {})
    again = reductions.book.next_to_reduce()
    assert again.case == "corpus/a.json" and again.retry
    resumed = reductions.book.settle(again, MISMATCH, graph("frac"), "reduced/a2.json")
    assert resumed is reductions.book.causes[cause.key] and resumed.hits == 1
    assert resumed.reduced_case == "reduced/a.json"
    resumed.record(MinimizedRepro("minimized/frac", 3, 1, 10, 1.0, Reproduction.REPRODUCES))
    assert resumed.writing_from is None
    assert RootCauseBook.from_json(reductions.book.to_json()).requeue_unwritten() == []
    # a cause a resumed run's --known holds is not written again
    known = RootCauseBook.from_json(book.to_json())
    reductions = CampaignReductions(SimpleNamespace(features=SimpleNamespace(device="cpu")),
                                    KnownBugs({cause.key: "minimized/frac"}))
    reductions.restore(known, {})
    assert [h.case for h in reductions.book.pending] == ["corpus/novel.json"]


def test_a_bucket_is_what_its_root_causes_are_once_they_are_reduced():
    """An Inductor CPU campaign closed with "3 new failure(s), 1 known" over its coarse buckets
    while every root cause reduced out of them was known: the bucket lines said "new, not
    reduced" of buckets whose hits had been reduced to committed bugs. A bucket now says what its
    root causes are, and how many of its hits still wait."""
    reduced = graph("frac")
    book = RootCauseBook({root_cause_key(MISMATCH, reduced): "minimized/frac"})
    assert book.bucket_news(MISMATCH.key()) is None
    for case in ("a", "b", "c"):
        book.offer(MISMATCH, graph("exp", "frac", "sin"), f"corpus/{case}.json")
    assert book.bucket_news(MISMATCH.key()) == "3 hit(s) pending a reduction"
    book.settle(book.pending[0], MISMATCH, reduced)
    assert book.bucket_news(MISMATCH.key()) == "root causes 0 new, 1 known (below); 2 hit(s) pending a reduction"
    book.settle(book.pending[0], MISMATCH, graph("log1p"))
    book.settle(book.pending[0], MISMATCH, None)  # no longer failed: dropped, not a cause
    assert book.bucket_news(MISMATCH.key()) == "root causes 1 new, 1 known (below)"
    assert book.bucket_news(ASSERT.key()) is None
