"""The paper-table scripts run end to end on the bundled samples with scripted fake models (one
per model name): their options, which model does what, and what each table measures."""

from __future__ import annotations

import json
import re

import pytest

from helpers import last_question
from netcast.errors import InputError


def table_rows(out: str, first_cell: str) -> list[list[str]]:
    """The cells of every markdown table row whose first cell starts with ``first_cell``."""
    rows = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith(first_cell):
            rows.append(cells)
    return rows


def judge_prompts(models, name: str, field: str) -> list[str]:
    return [p for p in models.prompts(name) if f"[[ ## {field} ## ]]" in p]


# --- the options every script shares ----------------------------------------------------------


@pytest.mark.parametrize("name", ["one_shot_tables", "iterative_tables", "test_time_tables"])
def test_a_judge_that_is_the_model_under_test_is_refused(fake_models, script, name):
    module = script(name)
    with pytest.raises(SystemExit, match="judge"):
        module.main(["--questions", "1", "--model", "m", "--judge-model", "m"])


@pytest.mark.parametrize(
    "name",
    [
        "one_shot_tables",
        "iterative_tables",
        "laziness",
        "test_time_tables",
        "knowledge_tables",
        "iterkey_tables",
    ],
)
def test_every_script_takes_the_three_model_options(script, name, capsys):
    module = script(name)
    with pytest.raises(SystemExit) as done:
        module.main(["--help"])
    assert done.value.code == 0
    usage = capsys.readouterr().out
    for option in ("--model", "--judge-model", "--aux-model", "--questions"):
        assert option in usage
    assert "§" in module.__doc__ or "Table" in module.__doc__


# --- Fishing for Answers: One-SHOT -------------------------------------------------------------


def test_one_shot_judge_scores_by_level_with_a_separate_judge(fake_models, script, capsys):
    from netcast.data import load_dataset

    train = load_dataset("hotpotqa-sample", "train", limit=3).examples
    levels = {r["id"]: r["level"] for r in map(json.loads, open_train())}
    scores = {ex.question: 100 - 40 * i for i, ex in enumerate(train)}  # 100, 60, 20
    fake_models.replies["j"] = {"score": lambda prompt: scores[last_question(prompt)]}
    module = script("one_shot_tables")
    module.main(["--questions", "3", "--split", "train", "--model", "m", "--judge-model", "j"])
    out = capsys.readouterr().out
    assert "judge: j" in out and "model under test: m" in out and "command:" in out
    # the judge graded every answer of the five configurations; the model under test none
    assert len(judge_prompts(fake_models, "j", "reference_answers")) == 5 * 3
    assert not judge_prompts(fake_models, "m", "reference_answers")
    by_level: dict[str, list[int]] = {}
    for ex in train:
        by_level.setdefault(levels[ex.id], []).append(scores[ex.question])
    basic = table_rows(out, "Basic RAG (top-5)")[0]
    header = next(
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in out.splitlines()
        if line.startswith("| strategy | judge")
    )
    for level, values in by_level.items():
        column = next(i for i, c in enumerate(header) if c.startswith(f"judge {level} "))
        assert float(basic[column]) == pytest.approx(sum(values) / len(values), abs=0.05)
    assert float(basic[header.index("judge Avg (n=3)")]) == pytest.approx(60.0)


def open_train():
    from netcast.data.registry import sample_path

    return sample_path("hotpotqa_train100.jsonl").open(encoding="utf-8")


def test_one_shot_without_a_judge_says_so(fake_models, script, capsys):
    module = script("one_shot_tables")
    module.main(["--questions", "1", "--model", "m", "--judge-model", "none"])
    out = capsys.readouterr().out
    assert "judge: none" in out and "no judge" in out
    assert not fake_models.prompts("none")
    assert "dev questions are all 'hard'" in out  # the level field, and what it holds


def test_one_shot_chunk_retention_is_one_ratio_of_chunk_counts(script):
    module = script("one_shot_tables")
    row = {
        "trace": {
            "stages": [
                {"stage": "filter", "candidates": 50, "kept": 40, "added": ["x"]},
                {"stage": "crop", "cropped": 2, "unchanged": 3, "dropped": 1, "rejected": 4},
                {"stage": "select", "candidates": 41, "selected": 9},
            ]
        }
    }
    kept = module.retention([row])
    assert kept["filter"] == pytest.approx(0.8)
    assert kept["crop"] == pytest.approx(0.9)  # only "dropped" removes a chunk
    assert kept["all"] == pytest.approx(0.72)
    detail = module.stage_detail("x", [row])
    assert detail[5] == "6 / 4"  # accepted crops include unchanged and dropped ones
    assert detail[6] == "2 / 3 / 1"


# --- Fishing for Answers: iterative -----------------------------------------------------------


def test_iterative_tables_count_basic_rag_as_one_retrieval(fake_models, script, capsys):
    module = script("iterative_tables")
    argv = ["--questions", "2", "--model", "m", "--judge-model", "j", "--budgets", "300"]
    module.main(argv)
    out = capsys.readouterr().out
    table5 = out.split("### Table 5")[1].split("###")[0]
    basic = table_rows(table5, "Basic RAG (top-5)")[0]
    assert basic[-1].endswith("(1.00)")  # Basic RAG retrieves once
    agent = table_rows(table5, "+ Chunk Delete")[0]
    assert agent[-1].endswith("(1.00)")  # one search turn, its fallback in the same round
    fig5 = out.split("### §4.4 and Fig. 5")[1].split("###")[0]
    combined = table_rows(fig5, "Combined, budget 300")
    assert [r[1] for r in combined] == ["300", "300"]
    # the Top-K_max first round (the model's search and the budgeted fallback) is one retrieval
    assert [float(r[5]) for r in combined] == [1.0, 1.0]
    assert len(judge_prompts(fake_models, "j", "reference_answers")) == 8 * 2


def test_retrievals_count_search_rounds(script):
    module = script("iterative_tables")
    basic = {"trace": {"turns": [], "searches": [{"query": "q"}]}}
    agent = {
        "trace": {
            "turns": [{"action": "search"}, {"action": "search"}, {"action": "answer"}],
            # the first round's fallback search is a second search in the same round
            "searches": [{}, {}, {}],
        }
    }
    assert module.retrievals(basic) == 1
    assert module.retrievals(agent) == 2


def test_laziness_context_holds_one_gold_chunk_and_the_asked_length(fake_models, script, capsys):
    import random

    fake_models.replies["m"] = {"action": "search"}
    module = script("laziness")
    module.main(["--questions", "2", "--model", "m", "--judge-model", "j", "--lengths", "200"])
    out = capsys.readouterr().out
    assert "--judge-model j: ignored" in out and not fake_models.prompts("j")
    assert table_rows(out, "200")[0] == ["200", "2", "1", "0", "0"]
    from _common import dev_questions

    data, retriever = dev_questions("hotpotqa-sample", 1, fake_models.make("m"))
    example = data.examples[0]
    working = module.first_context(example, retriever.corpus, 300, random.Random(0))
    gold = [c for c in working.by_label.values() if c.doc_id in set(example.gold_ids)]
    assert len(gold) == 1 and working.tokens() >= 300


# --- Test-Time Strategies ---------------------------------------------------------------------


def test_test_time_tables_use_the_aux_model_and_a_binary_judge(fake_models, script, capsys):
    fake_models.replies["j"] = {"match": "False"}
    module = script("test_time_tables")
    argv = ["--questions", "2", "--model", "m", "--judge-model", "j", "--aux-model", "a"]
    module.main(argv)
    out = capsys.readouterr().out
    # the contextualizer is the auxiliary model, never the model under test
    assert judge_prompts(fake_models, "a", "new_passages")
    assert not judge_prompts(fake_models, "m", "new_passages")
    assert len(judge_prompts(fake_models, "j", "gold_answers")) == 4 * 2
    assert "auxiliary model: a" in out
    for row in table_rows(out.split("### Table 1")[1], "+ Cont (contextualizer a)"):
        assert row[3] == "0.000"  # LLM Match: the judge said no
    assert "Fig. 2" in out and "[0.000, 0.000] (n=2)" in out


def test_em_by_searches_has_bootstrap_intervals(script):
    from netcast.evaluation.report import bootstrap_ci

    module = script("test_time_tables")

    def row(n, em):
        return {"trace": {"searches": [{}] * n}, "scores": {"em": em}}

    curve = module.em_by_searches([row(1, 1.0), row(1, 0.0), row(1, 1.0), row(3, 0.0)])
    assert list(curve) == [1, 3]
    assert curve[1] == (3, *bootstrap_ci([1.0, 0.0, 1.0]))
    assert curve[3][:2] == (1, 0.0)


# --- Knowledge-Aware Iterative Retrieval ------------------------------------------------------


def first_passage_sentence(prompt: str) -> list[str]:
    """A verbatim segment of the first passage shown: '[P1] <its first sentence>'."""
    found = re.search(r"\[P1\] [^:\n]*: ([^.\n]+\.)", prompt)
    return [f"[P1] {found.group(1)}"] if found else []


def test_knowledge_tables_token_f1_cost_units_and_the_generator(
    fake_models, script, capsys, monkeypatch
):
    import netcast.data.registry

    def offline(name, split, limit=None):
        raise InputError(f"could not load {name} from the Hugging Face hub (offline)")

    monkeypatch.setattr(netcast.data.registry, "load_hub_records", offline)
    queries = iter(range(1000))
    fake_models.replies["m"] = {
        "query": lambda prompt: f"query number {next(queries)}",  # never a repeat
        "segments": lambda prompt: json.dumps(first_passage_sentence(prompt)),
        "known_facts": "[]",
        "still_required": '["more"]',  # never resolved: every question runs max_steps
    }
    module = script("knowledge_tables")
    module.main(
        [
            "--questions",
            "2",
            "--model",
            "m",
            "--aux-model",
            "g",
            "--judge-model",
            "j",
            "--agents",
            "1,2",
            "--dataset",
            "musique-sample,2wikimultihopqa",
            "--price-ratio",
            "10",
        ]
    )
    out = capsys.readouterr().out
    assert "### 2wikimultihopqa: unavailable" in out and "offline" in out
    assert "--judge-model j: ignored" in out and not fake_models.prompts("j")
    # the separate generator answered for every configuration, the model under test never did
    answer_field = "Answer the question using only the context passages"
    assert len([p for p in fake_models.prompts("g") if answer_field in p]) == 3 * 2
    assert not [p for p in fake_models.prompts("m") if answer_field in p]
    one, two = table_rows(out, "1 agent")[0], table_rows(out, "2 agents")[0]
    # agents, steps (open gaps never close: max_steps 6), cost units = 6 x agents x 10
    assert one[2:5] == ["1", "6", "60"]
    assert two[2:5] == ["2", "6", "120"]
    assert 0 < float(one[7]) <= 1  # token-level retrieval F1 of the kept segments
    naive = table_rows(out, "one-step retrieval")[0]
    assert naive[3] == "1" and naive[4] == "-"


# --- IterKey ----------------------------------------------------------------------------------


def test_iterkey_tables_per_step_models_and_every_iteration(fake_models, script, capsys):
    module = script("iterkey_tables")
    argv = [
        "--questions",
        "2",
        "--model",
        "m",
        "--retrievers",
        "bm25",
        "--keyword-model",
        "k",
        "--validation-model",
        "v",
        "--top-k",
        "1,3",
    ]
    module.main(argv)
    out = capsys.readouterr().out
    # Table 7: keywords by k (generation only: each question validated at once), Table 8:
    # forced-decoding validation by v
    assert len(judge_prompts(fake_models, "k", "keywords")) == 2
    assert len(fake_models.engines["v"].forced) == 2
    assert not judge_prompts(fake_models, "v", "keywords")
    # Table 9's run iterates five times although the first answer validated
    every = table_rows(out, "IterKey (BM25), every iteration (Table 9)")[0]
    assert every[6] == "5"  # searches/q
    assert "| 1st iteration EM | Base EM (first True) | VerifiedTrue EM | VerifiedAll EM" in out
    assert "### Tables 7-8" in out and len(table_rows(out, "IterKey (BM25), keywords by k")) == 5
    assert "| method | Top1 (%) | Top3 (%) |" in out
    latency = out.split("### Table 12")[1]
    rag = table_rows(latency, "RAG (BM25, top-3)")[0]
    assert rag[1] == "2" and rag[2] == "-" and rag[5] == "-"  # no expansion, no validation
    row = table_rows(latency, "IterKey (BM25)")[0]
    assert row[1] == "2" and all(float(v) >= 0 for v in row[2:6])
    assert float(row[2]) > 0 and float(row[5]) > 0


def test_verification_reads_every_iteration(script):
    module = script("iterkey_tables")

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
    v = module.verification(rows)
    assert v["first"] == 0.25
    assert v["base"] == 0.5
    assert v["true"] == 0.75
    assert v["all"] == 1.0
    assert v["first_true"] == pytest.approx((1 + 1 + 3 + 2) / 4)


def test_recall_at_k_reads_the_answer_in_retrieved_documents(bm25, script):
    module = script("iterkey_tables")
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
    (curve, share) = module.recall_at(rows, bm25, [1, 3, 6])

    def hits(query):
        ranked = [h.chunk.id for h in bm25.search(query, 6)]
        return [float("seine#0" in ranked[:k]) for k in (1, 3, 6)]

    first, second = hits("river through Paris France"), hits("Berlin Germany capital")
    assert first[1] == 1.0 and second[0] == 0.0
    assert curve == pytest.approx([(a + b) / 2 for a, b in zip(first, second, strict=True)])
    assert share == pytest.approx((0.5 + 0.0) / 2)  # per search: share of its documents
