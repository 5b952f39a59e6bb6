"""Reference rows: basic's answer step given only the gold passages, or none, beside the
strategies in a bench, and the report's share of the gap closed."""

import dspy
import pytest

from netcast.errors import InputError
from netcast.specs.reference import gold_context, reference_readers
from netcast.specs.report import add_gap_closed, strategies


def example(qid, question, gold):
    return dspy.Example(
        id=qid,
        question=question,
        answers=["x"],
        gold_ids=[g["id"] for g in gold],
        gold_passages=gold,
    ).with_inputs("question")


SEINE = {"id": "seine", "title": "Seine", "text": "The Seine flows through Paris.", "facts": []}


def test_the_gold_reader_sees_only_the_gold_passages_and_the_closed_one_none(scripted_lm):
    lm, engine = scripted_lm(lambda prompt: {"answer": "the Seine"})
    examples = [example("q1", "Which river flows through Paris?", [SEINE])]
    (gold_name, gold, _), (closed_name, closed, _) = reference_readers(
        ["gold", "closed"], examples, "data"
    )
    assert (gold_name, closed_name) == ("reference-gold", "reference-closed")
    prediction = gold(question="Which river flows through Paris?")
    assert prediction.context == ["Seine: The Seine flows through Paris."]
    assert prediction.evidence == ["seine"] and prediction.trace["lm_calls"] == 1
    assert "The Seine flows through Paris." in engine.prompts[0]
    closed(question="Which river flows through Paris?")
    assert "Seine" not in engine.prompts[1].split("[[ ## question ## ]]")[-2]


def test_a_question_without_gold_passages_and_an_unknown_reference_are_refused():
    with pytest.raises(InputError, match="data: question q2 has no gold passages"):
        gold_context([example("q2", "q?", [])], "data")
    with pytest.raises(InputError, match="unknown reference 'oracle'; choose gold, closed or"):
        reference_readers(["oracle"], [], "data")
    with pytest.raises(InputError, match="only gold takes an artifact"):
        reference_readers(["closed:some/artifact"], [], "data")


def test_a_gold_row_over_an_artifact_reads_with_that_artifacts_answer_step(scripted_lm, bm25):
    """gold:ARTIFACT: the artifact's own answer step (its prompt, its model) over the gold
    passages, named after the artifact; a program without basic's answer step is refused."""
    from netcast.session import build_program

    lm, engine = scripted_lm(lambda prompt: {"answer": "the Seine"})
    tuned = build_program("basic", bm25, lm=lm)
    tuned.answer.signature = tuned.answer.signature.with_instructions("TUNED INSTRUCTIONS")
    loaded = []

    def load_artifact(path):
        loaded.append(path)
        return tuned

    examples = [example("q1", "Which river flows through Paris?", [SEINE])]
    [(name, reader, artifact)] = reference_readers(
        ["gold:runs/artifacts/basic-tuned"], examples, "data", load_artifact=load_artifact
    )
    assert (name, artifact, loaded) == (
        "reference-gold-basic-tuned",
        "runs/artifacts/basic-tuned",
        ["runs/artifacts/basic-tuned"],
    )
    assert reader.name == "reference-gold"  # the report compares it with the untuned gold row
    prediction = reader(question="Which river flows through Paris?")
    assert prediction.context == ["Seine: The Seine flows through Paris."]
    assert "TUNED INSTRUCTIONS" in engine.prompts[0] and prediction.trace["lm_calls"] == 1
    with pytest.raises(InputError, match="has no answer step reading context and question"):
        reference_readers(
            ["gold:a/iterative"],
            examples,
            "data",
            load_artifact=lambda path: build_program("iterative", bm25, lm=lm),
        )


def row(program, f1, reference=False):
    return {
        "dataset": "d",
        "model": "m",
        "program": program,
        "f1": (f1, None, None),
        "reference": reference,
    }


def test_gap_closed_is_the_share_of_the_way_from_basic_to_the_gold_reader():
    rows = [
        row("basic", 0.2),
        row("one_shot", 0.35),
        row("reference-gold", 0.5, True),
        row("reference-closed", 0.1, True),
    ]
    add_gap_closed(rows)
    closed = {r["program"]: r["gap_closed"] for r in rows}
    assert closed["basic"] == 0.0
    assert closed["one_shot"] == pytest.approx(0.5)
    assert closed["reference-closed"] == pytest.approx(-1 / 3)
    assert [r["program"] for r in strategies(rows)] == ["basic", "one_shot"]
    lone = [row("basic", 0.2), row("one_shot", 0.3)]  # no gold row: nothing to close
    add_gap_closed(lone)
    assert all(r["gap_closed"] is None for r in lone)


def test_a_bench_runs_the_reference_rows_and_reports_the_gap_closed(scripted_lm, tmp_path):
    from netcast.specs.bench import run_bench

    def reader(prompt):  # right exactly when its context holds a supporting paragraph
        return {"answer": "right" if "[[ ## context ## ]]\n[]" not in prompt else "wrong"}

    from netcast.artifacts import save_artifact
    from netcast.optimize.workflow import make_recipe
    from netcast.programs import BasicRAG
    from netcast.specs.report import read_results, summary_rows

    lm, engine = scripted_lm(reader)
    tuned = BasicRAG(None)  # a compiled basic: its answer step's own prompt
    tuned.answer.signature = tuned.answer.signature.with_instructions("COMPILED PROMPT")
    recipe = make_recipe(program="basic", knobs={}, dataset="musique-sample")
    artifact = save_artifact(tmp_path / "art" / "tuned", tuned, recipe, {"after": None})
    run_bench(
        tmp_path / "run",
        ["basic"],
        ["musique-sample"],
        lm=lm,
        limit=2,
        references=["gold", "closed", f"gold:{artifact}"],
        progress=False,
    )
    folders = {p.name for p in (tmp_path / "run" / "musique-sample").iterdir()}
    assert folders == {"basic", "reference-gold", "reference-closed", "reference-gold-tuned"}
    assert sum("COMPILED PROMPT" in p for p in engine.prompts) == 2  # its 2 questions only
    report = (tmp_path / "run" / "report.md").read_text()
    assert "| reference-gold (reference) | 2 |" in report
    assert "| reference-closed (reference) | 2 |" in report
    assert "| reference-gold-tuned (reference) | 2 |" in report
    rows = {r["program"]: r for r in summary_rows(read_results(tmp_path / "run"))}
    assert rows["reference-gold-tuned"]["reference"]  # compared with the untuned gold reader
    assert rows["reference-gold-tuned"]["diff_vs_uncompiled"][0] == 0.0
    assert "gap closed" in report
    # a reference row is never the best strategy of the cost summary
    cost = report.split("## Cost")[1].split("##")[0]
    assert "reference" not in cost
