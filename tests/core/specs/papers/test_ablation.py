"""What the papers' ablation tables measure, from saved rows (no model)."""

import json

import pytest

from netcast.evaluation.stats import bootstrap_ci
from netcast.specs.papers import agentic_test_time, fishing_for_answers, iterkey
from netcast.specs.papers.common import Run
from netcast.specs.spec import read_spec
from netcast.specs.tables import spec_report


def test_one_shot_chunk_retention_is_one_ratio_of_chunk_counts():
    row = {
        "trace": {
            "stages": [
                {"stage": "filter", "candidates": 50, "kept": 40, "added": ["x"]},
                {"stage": "crop", "cropped": 2, "unchanged": 3, "dropped": 1, "rejected": 4},
                {"stage": "select", "candidates": 41, "selected": 9},
            ]
        }
    }
    kept = fishing_for_answers.retention([row])
    assert kept["filter"] == pytest.approx(0.8)
    assert kept["crop"] == pytest.approx(0.9)  # only "dropped" removes a chunk
    assert kept["all"] == pytest.approx(0.72)
    detail = fishing_for_answers.stage_detail(Run("x", "one_shot", {}, [row]))
    assert detail[1] == "9.0 / 41.0"
    assert detail[5] == "6 / 4"  # accepted crops include unchanged and dropped ones
    assert detail[6] == "2 / 3 / 1"


def test_retrievals_count_search_rounds():
    basic = {"trace": {"turns": [], "searches": [{"query": "q"}]}}
    agent = {
        "trace": {
            "turns": [{"action": "search"}, {"action": "search"}, {"action": "answer"}],
            # the first round's fallback search is a second search in the same round
            "searches": [{}, {}, {}],
        }
    }
    assert fishing_for_answers.retrievals(basic) == 1
    assert fishing_for_answers.retrievals(agent) == 2


def test_agent_behaviour_counts_second_rounds_where_the_first_missed_and_judges_deletions():
    """A question whose first round missed gold b searched again and deleted a non-gold
    chunk; one whose first round found both deleted gold a; a basic row searched once."""

    def turn(action, returned=(), deleted=()):
        return {"action": action, "returned": list(returned), "deleted": list(deleted)}

    missed = {
        "gold_ids": ["a", "b"],
        "scores": {"tokens_in": 300},
        "trace": {"turns": [turn("search", ["a#0", "x#0"], ["x#0"]), turn("search", ["b#0"]),
                            turn("answer")]},
    }  # fmt: skip
    found = {
        "gold_ids": ["a", "b"],
        "scores": {"tokens_in": 100},
        "trace": {"turns": [turn("search", ["a#0", "b#0", "y#0"], ["a#0"]), turn("answer")]},
    }
    basic = {
        "gold_ids": ["c"],
        "scores": {"tokens_in": 200},
        "trace": {"turns": [], "searches": [{"ids": ["c#0", "z#1"]}]},
    }
    assert [fishing_for_answers.first_round_missed(r) for r in (missed, found, basic)] == [
        True, False, False
    ]  # fmt: skip
    seen = fishing_for_answers.agent_behaviour([missed, found, basic])
    assert seen["missed"] == 1 and seen["searched_again"] == 1.0
    assert seen["deleted"] == pytest.approx(2 / 3)
    assert seen["deletion_precision"] == 0.5  # x removed (not gold), a removed (gold)
    assert seen["retrievals"] == pytest.approx(4 / 3) and seen["tokens_in"] == 200
    none = fishing_for_answers.agent_behaviour([basic])
    assert none["searched_again"] is None and none["deletion_precision"] is None
    unannotated = {**missed, "gold_ids": [], "scores": {}}  # no gold ids: nothing judged
    seen = fishing_for_answers.agent_behaviour([unannotated])
    assert seen["known"] == 0 and seen["deletion_precision"] is None and seen["tokens_in"] is None


def test_em_by_searches_has_bootstrap_intervals():
    def row(n, em):
        return {"trace": {"searches": [{}] * n}, "scores": {"em": em}}

    curve = agentic_test_time.em_by_searches([row(1, 1.0), row(1, 0.0), row(1, 1.0), row(3, 0.0)])
    assert list(curve) == [1, 3]
    assert curve[1] == (3, *bootstrap_ci([1.0, 0.0, 1.0]))
    assert curve[3][:2] == (1, 0.0)


def test_verification_reads_every_iteration():
    def row(answers_valid, returned_em):
        turns = [{"answer": a, "valid": v} for a, v in answers_valid]
        return {"answers": ["Paris"], "trace": {"turns": turns}, "scores": {"em": returned_em}}

    rows = [
        # right at once, validated: every setting counts it
        row([("Paris", True), ("Lyon", False)], 1.0),
        # wrong answer validated first, right one later validated too: VerifiedTrue only
        row([("Lyon", True), ("Paris", True)], 0.0),
        # right answer never validated: VerifiedAll only
        row([("Lyon", False), ("Paris", False), ("Nice", False)], 0.0),
        # nothing validated, the last answer (returned) is right: Base and VerifiedTrue count it
        row([("Lyon", False), ("Paris", False)], 1.0),
    ]
    v = iterkey.verification(rows)
    assert v["first"] == 0.25
    assert v["base"] == 0.5
    assert v["true"] == 0.75
    assert v["all"] == 1.0
    assert v["first_true"] == pytest.approx((1 + 1 + 3 + 2) / 4)


def test_recall_at_k_reads_the_answer_in_retrieved_documents(bm25):
    rows = [
        {
            "answers": ["Seine"],
            "trace": {
                "searches": [
                    {"query": "river through Paris France", "ids": ["seine#0", "paris#0"]},
                    {"query": "Berlin Germany capital", "ids": ["berlin#0"]},
                ]
            },
        }
    ]
    curve, share = iterkey.recall_at(rows, bm25, [1, 3, 6])

    def hits(query):
        ranked = [h.chunk.id for h in bm25.search(query, 6)]
        return [float("seine#0" in ranked[:k]) for k in (1, 3, 6)]

    first, second = hits("river through Paris France"), hits("Berlin Germany capital")
    assert first[1] == 1.0 and second[0] == 0.0
    assert curve == pytest.approx([(a + b) / 2 for a, b in zip(first, second, strict=True)])
    assert share == pytest.approx((0.5 + 0.0) / 2)  # per search: share of its documents


def saved(folder, ems, searches, verdicts=None):
    """A configuration's saved rows (question i: EM ``ems[i]``, ``searches[i]`` searches) and
    the judge's verdicts on them."""
    folder.mkdir(parents=True)
    rows = []
    for i, (em, n) in enumerate(zip(ems, searches, strict=True)):
        scores = {"em": em, "f1": em, "recall": 1.0, "precision": 1.0, "lm_calls": n + 1,
                  "cached_calls": 0, "tokens_in": 1000, "tokens_out": 100, "searches": n,
                  "turns": n, "seconds": 3.0}  # fmt: skip
        trace = {"searches": [{"query": "q", "ids": []}] * n, "turns": [], "stages": []}
        rows.append({"id": f"q{i}", "answers": ["a"], "answer": "a", "trace": trace,
                     "scores": scores})  # fmt: skip
    (folder / "predictions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if verdicts is not None:
        lines = [
            json.dumps({"id": f"q{i}", "judge": "j", "kind": "match", "value": v})
            for i, v in enumerate(verdicts)
        ]
        (folder / "judge.jsonl").write_text("\n".join(lines) + "\n")


def test_the_test_time_table_is_rebuilt_from_rows_and_verdicts_with_exact_cells(tmp_path):
    saved(tmp_path / "rows" / "search-r1-baseline", [1, 0, 0, 0], [4, 4, 4, 3], [1, 1, None, 0])
    saved(tmp_path / "rows" / "de-dup", [1, 1, 0, 0], [4, 4, 4, 4])  # no verdict yet
    spec = tmp_path / "t.toml"
    spec.write_text(
        f'title = "T"\nkind = "ablation"\ntable = "test-time"\ndataset = "hotpotqa-sample"\n'
        f'limit = 4\nmodel = "m"\njudge = "j"\nrun_dir = "{tmp_path / "rows"}"\n'
        '[[config]]\nlabel = "Search-R1 baseline"\nprogram = "search_r1"\n'
        '[[config]]\nlabel = "+ De-Dup"\nprogram = "search_r1"\nknobs = { dedup = true }\n'
        '[[config]]\nlabel = "+ Hybrid"\nprogram = "search_r1"\nknobs = { dedup = true }\n'
    )
    out = spec_report(read_spec(spec))
    assert "Not run yet: + Hybrid" in out
    assert "Judge: j; replies it gave no verdict in (left out of the means): 1; answers not " in out
    lines = out.splitlines()
    # LLM Match over the two verdicts given (1, 0) of three read, the unreadable one left out
    assert "| Search-R1 baseline | 4 | 0.25 | 0.667 | 3.75 | 1,100 | 4.75 | 3 |" in lines
    assert "| + De-Dup | 4 | 0.5 | - | 4 | 1,100 | 5 | 3 |" in lines
    assert "| 3 | 0.000 [0.000, 0.000] (n=1) | - |" in lines
    assert "| 4 | 0.333 [0.000, 1.000] (n=3) | 0.500 [0.000, 1.000] (n=4) |" in lines
