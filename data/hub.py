"""Loaders for QA benchmarks on the Hugging Face hub (need a network; offline they fail with a
clear error). Each maps the hub's row schema to netcast's record schema (see ``records``)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from netcast.errors import InputError


def _join(sentences: list[str]) -> str:
    return " ".join(s.strip() for s in sentences if s.strip())


def _titled_context(context: Any) -> list[tuple[str, list[str]]]:
    """HotpotQA-style context, either ``{"title": [...], "sentences"|"content": [[...]]}``
    (hub parquet) or ``[[title, [sentences]], ...]`` (original JSON)."""
    if isinstance(context, Mapping):
        sentences = context.get("sentences", context.get("content"))
        return list(zip(context["title"], sentences, strict=True))
    return [(title, sents) for title, sents in context]


def _support_facts(facts: Any) -> list[list]:
    """``[[title, sentence index], ...]`` from the hub's ``{"title": [...], "sent_id": [...]}``
    or the original list of pairs."""
    if isinstance(facts, Mapping):
        return [[t, int(i)] for t, i in zip(facts["title"], facts["sent_id"], strict=True)]
    return [[title, int(i)] for title, i in facts]


def hotpot_style_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """HotpotQA (distractor) and 2WikiMultihopQA rows."""
    facts = _support_facts(row["supporting_facts"])
    gold = {title for title, _ in facts}
    return {
        "id": row.get("id", row.get("_id")),
        "question": row["question"],
        "answers": [row["answer"]],
        "supporting_facts": facts,  # the annotation teacher's supporting sentences
        "paragraphs": [
            {"title": title, "text": _join(sents), "is_supporting": title in gold}
            for title, sents in _titled_context(row["context"])
        ],
    }


def musique_row(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "question": row["question"],
        "answers": [row["answer"], *row.get("answer_aliases", [])],
        "question_decomposition": list(row.get("question_decomposition") or []),
        "paragraphs": [
            {"title": p["title"], "text": p["paragraph_text"], "is_supporting": p["is_supporting"]}
            for p in row["paragraphs"]
        ],
    }


def nq_open_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """NQ-open has no passages: pair it with a corpus of your own (``--corpus``)."""
    return {
        "id": row.get("id") or "nq-" + hashlib.sha1(row["question"].encode()).hexdigest()[:12],
        "question": row["question"],
        "answers": list(row["answer"]),
        "paragraphs": [],
    }


def triviaqa_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """TriviaQA (rc.nocontext): answer value plus aliases; no passages."""
    answer = row["answer"]
    answers = [answer["value"], *answer.get("aliases", [])]
    return {
        "id": row["question_id"],
        "question": row["question"],
        "answers": list(dict.fromkeys(answers)),
        "paragraphs": [],
    }


@dataclass(frozen=True)
class HubSource:
    path: str
    config: str | None
    splits: dict[str, str]  # netcast split -> hub split
    to_record: Callable[[Mapping[str, Any]], dict[str, Any]]


HUB_SOURCES: dict[str, HubSource] = {
    "hotpotqa": HubSource(
        "hotpotqa/hotpot_qa",
        "distractor",
        {"train": "train", "dev": "validation"},
        hotpot_style_row,
    ),
    "2wikimultihopqa": HubSource(
        "framolfese/2WikiMultihopQA",
        None,
        {"train": "train", "dev": "validation"},
        hotpot_style_row,
    ),
    "musique": HubSource(
        "dgslibisey/MuSiQue", None, {"train": "train", "dev": "validation"}, musique_row
    ),
    "nq-open": HubSource(
        "google-research-datasets/nq_open",
        "nq_open",
        {"train": "train", "dev": "validation"},
        nq_open_row,
    ),
    "triviaqa": HubSource(
        "mandarjoshi/trivia_qa",
        "rc.nocontext",
        {"train": "train", "dev": "validation"},
        triviaqa_row,
    ),
}


def load_hub_records(name: str, split: str, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows of a hub dataset split, mapped to records (first ``limit`` rows, in hub order)."""
    import datasets

    source = HUB_SOURCES[name]
    if split not in source.splits:
        raise InputError(
            f"dataset {name!r} has no split {split!r} (use {', '.join(source.splits)})"
        )
    hub_split = source.splits[split] + (f"[:{limit}]" if limit else "")
    try:
        rows = datasets.load_dataset(source.path, source.config, split=hub_split)
    except Exception as err:
        raise InputError(
            f"could not load {source.path} from the Hugging Face hub ({type(err).__name__}: "
            f"{err}). Hub datasets need a network; offline, use a bundled sample "
            "(e.g. --dataset hotpotqa-sample) or a local JSONL file."
        ) from err
    return [source.to_record(row) for row in rows]
