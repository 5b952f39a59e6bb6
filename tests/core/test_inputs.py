"""Inputs that look fine but are not (issue 53; docs/reliability.md names these tests row by
row): each either does the right thing or stops before the first model call with one line
naming the file, line and field (exit 2); where the input is usable but the result would mean
less than it seems, one ``warning:`` line says so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from netcast.cli.app import app

runner = CliRunner()


def cli(*args):
    return runner.invoke(app, [str(a) for a in args])


def one_line(result, code: int, *parts: str) -> str:
    """One ``error:`` line on stderr holding ``parts``, nothing on stdout, exit ``code``."""
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert not result.stdout.strip(), result.output
    for part in parts:
        assert part in lines[0], result.output
    return lines[0]


def warned(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("warning: ")]


def scripted(monkeypatch, scripted_lm, respond):
    """The command line's model: a scripted one (no model runs)."""
    lm, engine = scripted_lm(respond)
    monkeypatch.setattr(sys.modules["netcast.cli.options"], "command_lm", lambda *a, **k: lm)
    return engine


def record(rid="q1", **overrides) -> dict:
    base = {
        "id": rid,
        "question": "Who founded the lab?",
        "answers": ["Ann"],
        "paragraphs": [{"title": "Lab", "text": "Ann founded the lab.", "is_supporting": True}],
    }
    return {**base, **overrides}


def jsonl(path: Path, rows, encoding: str = "utf-8") -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding)
    return path


# --- 1. blank questions, answers and passages -------------------------------------------------


def test_a_blank_question_to_ask_is_one_line_before_any_model_call(monkeypatch, scripted_lm):
    engine = scripted(monkeypatch, scripted_lm, lambda prompt: {"answer": "no"})
    one_line(cli("ask", "   "), 2, "the question is blank")
    assert engine.prompts == []


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (record("q2", question=" \t "), "field 'question' is blank"),
        (record("q2", answers=["Ann", "  "]), "field 'answers[1]' is blank"),
        (
            record("q2", paragraphs=[{"title": "Lab", "text": "", "is_supporting": True}]),
            "field 'paragraphs[0].text' (a supporting one) is blank",
        ),
    ],
)
def test_a_blank_question_answer_or_gold_passage_in_a_dataset_names_its_line_and_field(
    monkeypatch, scripted_lm, tmp_path, bad, field
):
    engine = scripted(monkeypatch, scripted_lm, lambda prompt: {"answer": "Ann"})
    path = jsonl(tmp_path / "qa.jsonl", [record(), bad])
    result = cli("evaluate", "--dataset", path, "--split", "all", "--run-dir", tmp_path / "r")
    one_line(result, 2, f"qa.jsonl:2: {field}")
    assert engine.prompts == []


# --- 2. embeddings with NaN or infinite values, a .npy that is no array -----------------------


@pytest.fixture
def three_docs(tmp_path) -> Path:
    rows = [{"title": f"T{i}", "text": f"passage {i} about owls"} for i in range(3)]
    return jsonl(tmp_path / "docs.jsonl", rows)


def unit_rows(n: int) -> np.ndarray:
    vectors = np.random.default_rng(0).normal(size=(n, 384)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_embeddings_with_nan_or_infinite_values_are_refused_naming_the_row(
    tmp_path, three_docs, value
):
    vectors = unit_rows(3)
    vectors[1, 5] = value
    np.save(tmp_path / "e.npy", vectors)
    result = cli(
        "index", "--corpus", three_docs, "--retriever", "dense", "--embeddings",
        tmp_path / "e.npy", "--model", "openai/x", "--out", tmp_path / "idx",
    )  # fmt: skip
    one_line(result, 2, "e.npy: row 1, column 5 is", "1 row(s) hold NaN or an infinite value")
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize(
    ("write", "shown"),
    [
        (lambda path: path.write_text("0.1 0.2 0.3\n"), "not numpy's format"),
        (lambda path: np.save(path, np.array([{"a": 1}] * 3, dtype=object)), "holds Python"),
        (
            lambda path: np.save(path, np.zeros((3, 384), dtype=np.float32)),
            "row 0 is all zeros (3 row(s))",
        ),
    ],
)
def test_a_npy_that_is_no_usable_array_is_one_line_that_never_advises_unpickling(
    tmp_path, three_docs, write, shown
):
    write(tmp_path / "e.npy")
    result = cli(
        "index", "--corpus", three_docs, "--retriever", "dense", "--embeddings",
        tmp_path / "e.npy", "--model", "openai/x", "--out", tmp_path / "idx",
    )  # fmt: skip
    line = one_line(result, 2, "e.npy: ", shown)
    assert "allow_pickle" not in line


# --- 3. a passage longer than the model's window ----------------------------------------------


def test_a_paragraph_longer_than_a_model_window_is_split_when_the_pool_is_built(
    monkeypatch, scripted_lm, tmp_path
):
    from netcast.corpus import MAX_PARAGRAPH_TOKENS

    long_text = "Ann founded the lab in Lyon. " + "The lab grew and grew. " * 8_000
    rows = [
        record(paragraphs=[{"title": "Lab", "text": long_text, "is_supporting": True}]),
        record("q2", question="Where is the lab?", answers=["Lyon"]),
    ]
    path = jsonl(tmp_path / "qa.jsonl", rows)
    engine = scripted(monkeypatch, scripted_lm, lambda prompt: {"answer": "Ann"})
    result = cli("evaluate", "--dataset", path, "--split", "all", "--run-dir", tmp_path / "r")
    assert result.exit_code == 0, result.output
    assert any("paragraph(s) longer than 2,048 tokens" in w for w in warned(result))
    # every prompt holds a few windows of the paragraph, never all of its ~40k tokens
    assert engine.prompts and max(len(p.split()) for p in engine.prompts) < MAX_PARAGRAPH_TOKENS
    rows = [json.loads(line) for line in (tmp_path / "r" / "predictions.jsonl").open()]
    assert {r["id"]: r["scores"]["recall"] for r in rows}["q1"] == 1.0  # the gold document is found


def test_the_embedded_models_tokenizer_splits_a_33k_token_paragraph_into_windows():
    """With the embedded model's own tokenizer, as `netcast evaluate` counts passages."""
    from netcast.corpus import MAX_PARAGRAPH_TOKENS, Corpus, Document
    from netcast.models import token_counter

    counter = token_counter()
    text = "The archive of the old harbour office keeps ledgers of every ship. " * 2_600
    with pytest.warns(UserWarning, match="split into passages of 200 tokens"):
        corpus = Corpus.from_documents([Document("d", "Archive", text)], counter)
    assert counter.count(text) > 30_000
    assert len(corpus) > 100
    assert max(c.n_tokens for c in corpus) <= MAX_PARAGRAPH_TOKENS


# --- 4. text in another script ----------------------------------------------------------------

CHINESE = [
    ("北京", "北京是中国的首都，也是政治和文化中心。"),
    ("上海", "上海是中国最大的城市，位于长江入海口。"),
    ("广州", "广州是广东省的省会，以美食闻名。"),
]


def test_a_chinese_question_over_a_chinese_corpus_finds_its_passage_and_scores_by_character(
    monkeypatch, scripted_lm, tmp_path
):
    paragraphs = [{"title": t, "text": x, "is_supporting": t == "北京"} for t, x in CHINESE]
    rows = [
        {
            "id": "z1",
            "question": "中国的首都是哪里？",
            "answers": ["北京"],
            "paragraphs": paragraphs,
        }
    ]
    path = jsonl(tmp_path / "zh.jsonl", rows)

    def respond(prompt):  # right only when the passage reached the prompt
        return {"answer": "中国首都是北京。" if "北京是中国的首都" in prompt else "不知道"}

    scripted(monkeypatch, scripted_lm, respond)
    result = cli("evaluate", "--dataset", path, "--split", "all", "--run-dir", tmp_path / "r")
    assert result.exit_code == 0, result.output
    row = json.loads((tmp_path / "r" / "predictions.jsonl").read_text().splitlines()[0])
    assert row["scores"]["recall"] == 1.0
    # the reply's 7 characters hold the gold's 2: precision 2/7, recall 1
    assert row["scores"]["f1"] == pytest.approx(2 * (2 / 7) / (2 / 7 + 1))
    assert row["scores"]["em"] == 0.0


def test_a_query_bm25_finds_nothing_for_is_warned_of_naming_the_language_to_choose(tmp_path):
    from helpers import DOCS, WordCounter
    from netcast.corpus import Corpus
    from netcast.errors import NetcastWarning
    from netcast.retrievers.bm25 import BM25Retriever

    english = BM25Retriever(Corpus.from_documents(DOCS, WordCounter()))
    assert english.language == "english"
    with pytest.warns(NetcastWarning, match="--bm25-language cjk"):
        assert english.search("中国的首都是哪里", 3) == []
    stopwords = BM25Retriever(Corpus.from_documents(DOCS, WordCounter()))
    with pytest.warns(NetcastWarning, match="only stopwords"):
        assert stopwords.search("is it to the?", 3) == []


def test_the_bm25_language_is_chosen_at_index_time_recorded_and_used_for_queries(tmp_path):
    from netcast.retrievers import load_index

    docs = jsonl(
        tmp_path / "de.jsonl",
        [
            {"title": "Haus", "text": "Das Haus steht am Fluss."},
            {"title": "Baum", "text": "Der Baum wächst im Garten."},
        ],
    )
    result = cli("index", "--corpus", docs, "--out", tmp_path / "de", "--bm25-language", "german")
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "de" / "index.json").read_text())["bm25_language"] == "german"
    hits = load_index(tmp_path / "de").search("Häuser", 2)  # German plural, stemmed to "haus"
    assert [h.chunk.title for h in hits] == ["Haus"]
    one_line(
        cli("index", "--corpus", docs, "--out", tmp_path / "x", "--bm25-language", "klingon"),
        2,
        "unknown BM25 language 'klingon'",
    )


# --- 5. an option that contradicts the index --------------------------------------------------


def test_a_retriever_option_that_contradicts_the_index_is_one_line(tmp_path, three_docs):
    from helpers import capitals_file

    built = cli("index", "--corpus", three_docs, "--out", tmp_path / "bm25")
    assert built.exit_code == 0, built.output
    for command in (
        ["evaluate", "--dataset", capitals_file(tmp_path / "qa.jsonl", 2)],
        ["ask", "Where are owls?"],
    ):
        result = cli(*command, "--index", tmp_path / "bm25", "--retriever", "dense")
        one_line(result, 2, "--retriever dense, but", "is a bm25 index")


# --- 6. an artifact naming a program netcast does not have ------------------------------------


@pytest.mark.parametrize(
    ("change", "shown"),
    [
        ({"program": "quantum"}, "recipe.json: field 'program': unknown program 'quantum'"),
        ({"knobs": {"top_kk": 3}}, "recipe.json: field 'knobs': "),
    ],
)
def test_show_refuses_an_artifact_whose_recipe_names_an_unknown_program_or_knob(
    tmp_path, bm25, change, shown
):
    from netcast.artifacts import save_artifact
    from netcast.optimize.workflow import make_recipe
    from netcast.programs import BasicRAG

    recipe = make_recipe(program="basic", knobs={"top_k": 3}, dataset="hotpotqa-sample")
    recipe = {**recipe.to_dict(), **change}  # as an edited recipe.json holds it
    out = save_artifact(tmp_path / "a", BasicRAG(bm25), recipe, {"after": None})
    one_line(cli("show", out), 2, shown)


# --- 7. a UTF-8 byte-order mark ----------------------------------------------------------------


def test_dataset_and_corpus_files_saved_with_a_byte_order_mark_are_read(tmp_path):
    qa = jsonl(tmp_path / "qa.jsonl", [record(), record("q2")], encoding="utf-8-sig")
    assert qa.read_bytes().startswith(b"\xef\xbb\xbf")
    result = cli("index", "--dataset", qa, "--out", tmp_path / "a", "--model", "openai/x")
    assert result.exit_code == 0, result.output
    docs = jsonl(tmp_path / "docs.jsonl", [{"title": "T", "text": "owls"}], "utf-8-sig")
    result = cli("index", "--corpus", docs, "--out", tmp_path / "b")
    assert result.exit_code == 0, result.output


# --- 8. training on the dev questions, a validation fold too small -----------------------------


def test_a_compile_whose_train_and_dev_questions_overlap_says_how_many(
    monkeypatch, scripted_lm, tmp_path
):
    from helpers import capitals_file

    scripted(monkeypatch, scripted_lm, lambda prompt: {"answer": "Paris"})
    dataset = capitals_file(tmp_path / "capitals.jsonl", 8)
    result = cli(
        "compile", "--dataset", dataset, "--train-split", "all", "--dev-split", "all",
        "--train-limit", "6", "--dev-limit", "3", "--teacher", "annotations",
        "--out", tmp_path / "art",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert any("share 3 of 3 dev question id(s) (the first: 'q0')" in w for w in warned(result))
    apart = cli(
        "compile", "--dataset", dataset, "--train-limit", "6", "--dev-limit", "3",
        "--teacher", "annotations", "--out", tmp_path / "art2",
    )  # fmt: skip
    assert apart.exit_code == 0, apart.output
    assert not warned(apart)


def test_a_race_on_too_few_validation_questions_warns_that_its_winner_is_a_guess(
    monkeypatch, scripted_lm, tmp_path
):
    def respond(prompt):
        if "[[ ## reasoning ## ]]" in prompt:
            return {"reasoning": "so", "query": "capital", "answer": "Berlin"}
        return {"answer": "Paris"}

    from helpers import capitals_file

    scripted(monkeypatch, scripted_lm, respond)
    dataset = capitals_file(tmp_path / "capitals.jsonl", 12)
    result = cli(
        "compile", "--program", "basic,multihop", "--dataset", dataset, "--train-limit", "2",
        "--dev-limit", "1", "--set", "chain_of_thought=false", "--set", "links=0",
        "--out", tmp_path / "art",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert any(
        "strategy race scores its candidates on 1 held-out training question(s) (of 2)" in w
        and "fewer than 5" in w
        for w in warned(result)
    ), result.output


def test_the_fewest_telling_questions_are_where_the_sign_flip_test_first_reaches_the_level():
    from netcast.evaluation.stats import paired_p_value
    from netcast.inputs import fewest_telling

    for level in (0.1, 0.05):
        n = fewest_telling(level)
        assert paired_p_value([1.0] * n, [0.0] * n) < level
        assert paired_p_value([1.0] * (n - 1), [0.0] * (n - 1)) >= level
