"""Named datasets: bundled samples, hub benchmarks, or a local JSONL path."""

from __future__ import annotations

import hashlib
import re
from importlib import resources
from pathlib import Path
from typing import Any

from netcast.corpus import Document, load_documents, read_jsonl
from netcast.data.hub import HUB_SOURCES, load_hub_records
from netcast.data.records import QADataset, check_record, pooled_documents, to_example
from netcast.errors import InputError

SAMPLES: dict[str, dict[str, list[str]]] = {
    # split -> files; the corpus pools the paragraphs of every file of the sample.
    "hotpotqa-sample": {"train": ["hotpotqa_train100.jsonl"], "dev": ["hotpotqa_dev300.jsonl"]},
    "musique-sample": {"all": ["musique_train100.jsonl"]},
    # hotpotqa-sample's questions over every bundled paragraph (HotpotQA train and dev, MuSiQue:
    # ~5.9k passages, twice hotpotqa-sample's pool), so retrieval is tested harder
    "hotpotqa-wide": {"train": ["hotpotqa_train100.jsonl"], "dev": ["hotpotqa_dev300.jsonl"]},
    # the 1,003 bundled HotpotQA training questions over a pool of their own paragraphs (no dev
    # question's): "all" for training; "train" / "dev" a 90/10 validation fold of them
    "hotpotqa-train": {"all": ["hotpotqa_train100.jsonl", "hotpotqa_train903.jsonl"]},
    # 494 2WikiMultihopQA training questions, split 80/20 by a hash of the id (a transfer check)
    "2wiki-sample": {"all": ["2wiki_train494.jsonl"]},
}
# The share of a hash-split sample's questions (those with an "all" key) in its dev split
SAMPLE_DEV_PERCENT: dict[str, int] = {"hotpotqa-train": 10, "2wiki-sample": 20}
# Samples whose corpus pools other files than their questions' (default: their own files)
SAMPLE_CORPORA: dict[str, list[str]] = {
    "hotpotqa-wide": [
        "hotpotqa_train100.jsonl",
        "hotpotqa_dev300.jsonl",
        "musique_train100.jsonl",
    ],
}
SPLITS = ("train", "dev", "all")
DEV_PERCENT = 50


def sample_path(filename: str) -> Path:
    return Path(str(resources.files("netcast.data") / "samples" / filename))


def dataset_names() -> list[str]:
    return [*SAMPLES, *HUB_SOURCES]


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Validated records from a JSONL file in the samples' schema; errors name file:line."""
    records, first_line = [], {}
    for n, rec in read_jsonl(path):
        record = check_record(rec, f"{path}:{n}")
        key = str(record["id"])
        if key in first_line:
            raise InputError(
                f"{path}:{n}: field 'id' {key!r} repeats line {first_line[key]} (ids must be"
                " unique)"
            )
        first_line[key] = n
        records.append(record)
    if not records:
        raise InputError(f"{path}: no records")
    return records


def in_dev(record_id: str, dev_percent: int = DEV_PERCENT) -> bool:
    """Deterministic split by a hash of the id (independent of order and of Python's seed)."""
    return int(hashlib.sha1(str(record_id).encode()).hexdigest(), 16) % 100 < dev_percent


def split_records(
    records: list[dict[str, Any]], split: str, dev_percent: int = DEV_PERCENT
) -> list[dict[str, Any]]:
    if split == "all":
        return records
    return [r for r in records if in_dev(r["id"], dev_percent) == (split == "dev")]


def _local_records(name: str) -> list[dict[str, Any]]:
    path = Path(name)
    if path.is_dir():
        raise InputError(f"{path}: is a directory; give a .jsonl file of records")
    return read_records(path)


def _is_local(name: str) -> bool:
    return name.endswith(".jsonl") or Path(name).exists()


def load_corpus(
    name: str, corpus: str | Path | None = None, required: bool = True
) -> tuple[str, list[Document]]:
    """(corpus name, documents) of dataset ``name``, the same whichever split is asked for:
    ``corpus`` (a documents JSONL) when given; a bundled sample's or a local file's records
    pooled; a hub benchmark's train and dev splits pooled (in full, whatever the limit). A
    dataset without passages is refused unless ``required`` is false (its questions are then
    asked of a saved index: ``--index``)."""
    if corpus is not None:
        return f"file:{Path(corpus).name}", load_documents(corpus)
    if name in SAMPLES:
        files = SAMPLE_CORPORA.get(name) or [f for fs in SAMPLES[name].values() for f in fs]
        records = [r for f in files for r in read_records(sample_path(f))]
    elif name in HUB_SOURCES:
        records = [r for s in HUB_SOURCES[name].splits for r in load_hub_records(name, s)]
    elif _is_local(name):
        records = _local_records(name)
    else:
        raise InputError(
            f"unknown dataset {name!r}; choose one of {', '.join(dataset_names())} "
            "or give a path to a .jsonl file"
        )
    documents = pooled_documents(records)
    if not documents and required:
        raise no_passages(name)
    return name, documents


def no_passages(name: str) -> InputError:
    """The error for a dataset without passages asked to search its own."""
    return InputError(
        f"dataset {name!r} has no passages of its own: give a corpus file (--corpus) or "
        "a saved index (--index)"
    )


def load_dataset(
    name: str,
    split: str = "dev",
    limit: int | None = None,
    corpus: str | Path | None = None,
    corpus_required: bool = True,
) -> QADataset:
    """Examples of ``split`` (``train``, ``dev`` or ``all``, or a part of one as Hugging Face
    ``datasets`` writes it: ``train[100:300]``, ``train[100:]``) and the dataset's retrieval
    corpus.

    ``name`` is a bundled sample (``hotpotqa-sample``, ``musique-sample``), a hub benchmark
    (``hotpotqa``, ``2wikimultihopqa``, ``musique``, ``nq-open``, ``triviaqa``) or a path to a
    JSONL file of records. ``limit`` keeps the first questions of the split; the corpus does not
    depend on the split or the limit (see ``load_corpus``; ``corpus_required=False`` lets a
    dataset without passages load, for a saved index to answer).
    """
    named = split
    split, part = parse_split(split)
    if limit is not None and limit <= 0:
        raise InputError(f"limit must be a positive number of questions, got {limit}")
    if name in SAMPLES:
        files = SAMPLES[name]
        if split in files:
            records = [r for f in files[split] for r in read_records(sample_path(f))]
        else:
            everything = [
                r for fs in files.values() for f in fs for r in read_records(sample_path(f))
            ]
            percent = SAMPLE_DEV_PERCENT.get(name, DEV_PERCENT)
            records = split_records(everything, split, percent) if "all" in files else everything
    elif name in HUB_SOURCES:
        splits = HUB_SOURCES[name].splits if split == "all" else [split]
        records = [r for s in splits for r in load_hub_records(name, s)]
    elif _is_local(name):
        records = split_records(_local_records(name), split)
    else:
        raise InputError(
            f"unknown dataset {name!r}; choose one of {', '.join(dataset_names())} "
            "or give a path to a .jsonl file"
        )
    records = records[part]
    if limit is not None:
        records = records[:limit]
    corpus_name, documents = load_corpus(name, corpus, required=corpus_required)
    return QADataset(name, named, [to_example(r) for r in records], documents, corpus_name)


SPLIT_PART = re.compile(r"(?P<split>[a-z]+)(?:\[(?P<start>\d*):(?P<stop>\d*)\])?")


def parse_split(split: str) -> tuple[str, slice]:
    """``train`` -> ("train", all of it); ``train[100:300]`` -> ("train", questions 100 to 299
    in the split's order); one line for anything else."""
    match = SPLIT_PART.fullmatch(split)
    if match is None or match["split"] not in SPLITS:
        raise InputError(
            f"unknown split {split!r}; choose one of {', '.join(SPLITS)}, or a part of one "
            "such as train[100:300]"
        )
    start, stop = (int(match[k]) if match[k] else None for k in ("start", "stop"))
    if start is not None and stop is not None and stop <= start:
        raise InputError(f"split {split!r}: its part is empty (give start < stop)")
    return match["split"], slice(start, stop)
