"""The papers' ablation specs run end to end on the bundled samples with scripted fake models (one
per model name): which model does what, what each table measures, and that the tables (judge
columns included) rebuild from the saved rows and verdicts without any model."""

from __future__ import annotations

import json
import re

import pytest

from helpers import last_question
from netcast.errors import InputError
from netcast.specs.spec import read_spec, run_spec
from netcast.specs.tables import spec_report


def table_rows(out: str, first_cell: str) -> list[list[str]]:
    """The cells of every markdown table row whose first cell starts with ``first_cell``."""
    rows = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith(first_cell):
            rows.append(cells)
    return rows


def section(out: str, title: str) -> str:
    return out.split(f"## {title}")[1].split("\n## ")[0]


def judge_prompts(models, name: str, field: str) -> list[str]:
    return [p for p in models.prompts(name) if f"[[ ## {field} ## ]]" in p]


def ablation(tmp_path, table: str, configs: list[str], **fields) -> object:
    """An ablation spec in ``tmp_path`` (model m; ``fields`` add or replace top-level fields)."""
    top = {"dataset": '"hotpotqa-sample"', "limit": "2", "model": '"m"', **fields}
    text = f'title = "t"\nkind = "ablation"\ntable = "{table}"\nrun_dir = "{tmp_path / "rows"}"\n'
    text += "".join(f"{k} = {v}\n" for k, v in top.items())
    text += "".join(f"\n[[config]]\n{c.strip()}\n" for c in configs)
    path = tmp_path / f"{table}.toml"
    path.write_text(text)
    return read_spec(path)


def rebuilt_without_a_model(spec, monkeypatch) -> str:
    """The spec's tables with every way of making a model broken."""
    import netcast
    import netcast.models

    def no_model(*args, **kwargs):
        raise AssertionError("the tables must rebuild without a model")

    for where in (netcast, netcast.models):
        monkeypatch.setattr(where, "make_lm", no_model)
    return spec_report(spec)


ONE_SHOT = [
    'label = "Basic RAG (top-5)"\nprogram = "basic"\nknobs = { top_k = 5 }',
    'label = "Token-constrained Top-K_max"\nprogram = "one_shot"',
    'label = "+ chunk filter"\nprogram = "one_shot"\nknobs = { filter = true }',
    'label = "+ chunk cropping"\nprogram = "one_shot"\nknobs = { crop = true }',
    'label = "+ filter & cropping"\nprogram = "one_shot"\nknobs = { filter = true, crop = true }',
]


@pytest.mark.parametrize("table", ["one-shot", "iterative", "test-time"])
def test_a_judge_that_is_the_model_under_test_is_refused(fake_models, tmp_path, table):
    program = "search_r1" if table == "test-time" else "basic"
    spec = ablation(tmp_path, table, [f'label = "a"\nprogram = "{program}"'], judge='"m"')
    with pytest.raises(InputError, match=r"field 'judge': m is the model under test"):
        run_spec(spec, fake_models.make, progress=False)
    assert not fake_models.prompts("m")


# --- Fishing for Answers: One-SHOT -------------------------------------------------------------


def open_train():
    from netcast.data.registry import sample_path

    return sample_path("hotpotqa_train100.jsonl").open(encoding="utf-8")


def test_one_shot_judge_scores_by_level_and_rebuild_from_saved_verdicts(
    fake_models, tmp_path, monkeypatch
):
    from netcast.data import load_dataset

    train = load_dataset("hotpotqa-sample", "train", limit=3).examples
    levels = {r["id"]: r["level"] for r in map(json.loads, open_train())}
    scores = {ex.question: 100 - 40 * i for i, ex in enumerate(train)}  # 100, 60, 20
    fake_models.replies["j"] = {"score": lambda prompt: scores[last_question(prompt)]}
    spec = ablation(tmp_path, "one-shot", ONE_SHOT, split='"train"', limit="3", judge='"j"')
    run_spec(spec, fake_models.make, progress=False)
    # the judge graded every answer of the five configurations; the model under test none
    assert len(judge_prompts(fake_models, "j", "reference_answers")) == 5 * 3
    assert not judge_prompts(fake_models, "m", "reference_answers")
    out = rebuilt_without_a_model(spec, monkeypatch)
    assert "Judge: j; replies it gave no verdict in (left out of the means): 0." in out
    by_level: dict[str, list[int]] = {}
    for ex in train:
        by_level.setdefault(levels[ex.id], []).append(scores[ex.question])
    basic = table_rows(section(out, "Table 1"), "Basic RAG (top-5)")[0]
    header = next(
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in out.splitlines()
        if line.startswith("| strategy | judge")
    )
    for level, values in by_level.items():
        column = next(i for i, c in enumerate(header) if c.startswith(f"judge {level} "))
        assert float(basic[column]) == pytest.approx(sum(values) / len(values), abs=0.05)
    assert float(basic[header.index("judge Avg (n=3)")]) == pytest.approx(60.0)
    table3 = table_rows(section(out, "Table 3"), "Basic RAG (top-5)")[0]
    assert table3[1] == "60.0"
    # a second run finds every answer judged: no call to anyone
    calls = {name: len(fake_models.prompts(name)) for name in ("m", "j")}
    run_spec(spec, fake_models.make, progress=False)
    assert {name: len(fake_models.prompts(name)) for name in ("m", "j")} == calls


def test_one_shot_without_a_judge_says_so(fake_models, tmp_path):
    spec = ablation(tmp_path, "one-shot", ONE_SHOT[:2], limit="1")
    run_spec(spec, fake_models.make, progress=False)
    out = spec_report(spec)
    assert "No judge (the spec names none)" in out
    assert "dev questions are all 'hard'" in out  # the level field, and what it holds
    assert table_rows(section(out, "Table 1"), "Basic RAG")[0][1] == "-"


# --- Fishing for Answers: iterative -----------------------------------------------------------


def test_iterative_tables_count_basic_rag_as_one_retrieval(fake_models, tmp_path):
    configs = [
        'label = "Basic RAG (top-5)"\nprogram = "basic"\nknobs = { top_k = 5 }',
        'label = "+ Chunk Delete"\nprogram = "iterative"\n'
        "knobs = { fallback = true, delete = true }",
        'label = "Combined, budget 300, no delete"\nprogram = "combined"\n'
        "knobs = { delete = false, token_budget = 300 }",
        'label = "Combined, budget 300, with delete"\nprogram = "combined"\n'
        "knobs = { delete = true, token_budget = 300 }",
    ]
    spec = ablation(tmp_path, "iterative", configs, judge='"j"')
    run_spec(spec, fake_models.make, progress=False)
    assert len(judge_prompts(fake_models, "j", "reference_answers")) == 4 * 2
    out = spec_report(spec)
    table5 = section(out, "Table 5")
    assert table_rows(table5, "Basic RAG (top-5)")[0][-1].endswith("(1.00)")  # one search
    # one search turn, its fallback search in the same round
    assert table_rows(table5, "+ Chunk Delete")[0][-1].endswith("(1.00)")
    combined = table_rows(section(out, "§4.4 and Fig. 5"), "Combined, budget 300")
    assert [r[1] for r in combined] == ["300", "300"]
    # the Top-K_max first round (the model's search and the budgeted fallback) is one retrieval
    assert [float(r[5]) for r in combined] == [1.0, 1.0]


# --- Test-Time Strategies ---------------------------------------------------------------------


def test_test_time_uses_the_aux_model_and_keeps_the_binary_judges_verdicts(
    fake_models, tmp_path, monkeypatch
):
    fake_models.replies["j"] = {"match": "False"}
    configs = [
        'label = "Search-R1 baseline"\nprogram = "search_r1"',
        'label = "+ Cont (contextualizer a)"\nprogram = "search_r1"\n'
        'knobs = { contextualize = true, aux_model = "a" }',
    ]
    spec = ablation(tmp_path, "test-time", configs, judge='"j"')
    run_spec(spec, fake_models.make, progress=False)
    # the contextualizer is the auxiliary model, never the model under test
    assert judge_prompts(fake_models, "a", "new_passages")
    assert not judge_prompts(fake_models, "m", "new_passages")
    assert len(judge_prompts(fake_models, "j", "gold_answers")) == 2 * 2
    verdicts = (tmp_path / "rows" / "cont-contextualizer-a" / "judge.jsonl").read_text()
    assert [json.loads(v)["value"] for v in verdicts.splitlines()] == [0.0, 0.0]
    out = rebuilt_without_a_model(spec, monkeypatch)
    for row in table_rows(section(out, "Table 1"), "+ Cont (contextualizer a)"):
        assert row[3] == "0.000"  # LLM Match: the judge said no
    assert "Fig. 2" in out and "[0.000, 0.000] (n=2)" in out


# --- Knowledge-Aware Iterative Retrieval ------------------------------------------------------


def first_passage_sentence(prompt: str) -> list[str]:
    """A verbatim segment of the first passage shown: '[P1] <its first sentence>'."""
    found = re.search(r"\[P1\] [^:\n]*: ([^.\n]+\.)", prompt)
    return [f"[P1] {found.group(1)}"] if found else []


def test_knowledge_token_f1_cost_units_and_the_generator(fake_models, tmp_path):
    queries = iter(range(1000))
    fake_models.replies["m"] = {
        "query": lambda prompt: f"query number {next(queries)}",  # never a repeat
        "segments": lambda prompt: json.dumps(first_passage_sentence(prompt)),
        "known_facts": "[]",
        "still_required": '["more"]',  # never resolved: every question runs max_steps
    }
    configs = [
        'label = "one-step retrieval (naive RAG, top-10)"\nprogram = "basic"\n'
        'knobs = { top_k = 10 }\nstep_models = { answer = "g" }',
        'label = "1 agent"\nprogram = "knowledge"\nknobs = { n_agents = 1, generator_model = "g" }',
        'label = "2 agents"\nprogram = "knowledge"\n'
        'knobs = { n_agents = 2, generator_model = "g" }',
    ]
    spec = ablation(
        tmp_path,
        "knowledge",
        configs,
        dataset='"musique-sample"',
        options="{ price_ratio = 10 }",
    )
    run_spec(spec, fake_models.make, progress=False)
    # the separate generator answered for every configuration, the model under test never did
    answer_field = "Answer the question using only the context passages"
    assert len([p for p in fake_models.prompts("g") if answer_field in p]) == 3 * 2
    assert not [p for p in fake_models.prompts("m") if answer_field in p]
    out = spec_report(spec)
    one, two = table_rows(out, "1 agent")[0], table_rows(out, "2 agents")[0]
    # agents, steps (open gaps never close: max_steps 6), cost units = 6 x agents x 10
    assert one[2:5] == ["1", "6", "60"]
    assert two[2:5] == ["2", "6", "120"]
    assert 0 < float(one[7]) <= 1  # token-level retrieval F1 of the kept segments
    naive = table_rows(out, "one-step retrieval")[0]
    assert naive[3] == "1" and naive[4] == "-"


# --- IterKey ----------------------------------------------------------------------------------


def test_iterkey_per_step_models_and_every_iteration(fake_models, tmp_path):
    keywords = '"k"'
    configs = [
        'label = "RAG (BM25, top-3)"\nprogram = "basic"\nknobs = { top_k = 3 }',
        'label = "IterKey (BM25)"\nprogram = "iterkey"',
        'label = "IterKey (BM25), every iteration (Table 9)"\nprogram = "iterkey"\n'
        "knobs = { stop_when_valid = false }",
        'label = "IterKey (BM25), keywords by k"\nprogram = "iterkey"\n'
        f"step_models = {{ generate = {keywords}, regenerate = {keywords}, "
        f"regenerate_from_document = {keywords} }}",
        'label = "IterKey (BM25), validation by v"\nprogram = "iterkey"\n'
        'step_models = { validate = "v", validate_next_token = "v" }',
    ]
    spec = ablation(tmp_path, "iterkey", configs, options="{ top_k = [1, 3] }")
    run_spec(spec, fake_models.make, progress=False)
    # Table 7: keywords by k (generation only: each question validated at once), Table 8:
    # forced-decoding validation by v
    assert len(judge_prompts(fake_models, "k", "keywords")) == 2
    assert len(fake_models.engines["v"].forced) == 2
    assert not judge_prompts(fake_models, "v", "keywords")
    out = spec_report(spec)
    # Table 9's run iterates five times although the first answer validated
    every = table_rows(out, "IterKey (BM25), every iteration (Table 9)")[0]
    assert every[6] == "5"  # searches/q
    assert "| 1st iteration EM | Base EM (first True) | VerifiedTrue EM | VerifiedAll EM" in out
    per_step = section(out, "Tables 7-8")
    assert table_rows(per_step, "IterKey (BM25), keywords by k")[0][-1] == "+0.000"
    assert "| method | Top1 (%) | Top3 (%) |" in out
    assert "Table 12 (latency per step) is measured live" in out
