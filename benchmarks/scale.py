"""BM25 over a corpus of a million passages on one machine: ``netcast index --corpus`` (streamed,
chunks on disk, memory-mapped BM25) against raw bm25s on the same texts, then load time, query
latency and a question answered end to end over the built index.

No corpus that large can be downloaded here, so the corpus is real sentences recombined: every
bundled paragraph (HotpotQA train + dev, MuSiQue) as it is, then passages of 3 to 6 sentences
drawn at random (seed 0) from all of them, each titled with a random real title and a number,
until ``--passages``. Each step runs in its own process and reports its own peak RSS.

    .venv/bin/python benchmarks/scale.py --passages 1000000 --work /tmp/netcast-scale

Steps are skipped when their output exists in ``--work`` (a stopped run resumes); ``--ask 0``
leaves out the end-to-end questions (the embedded model's calls).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import header, percentile, table

HERE = Path(__file__).resolve().parent
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def emit(**fields) -> None:
    print("RESULT " + json.dumps({**fields, "peak_rss_mb": round(peak_rss_mb(), 1)}), flush=True)


# --- the steps (each run as `scale.py STEP ...` in a process of its own) ----------------------


def generate(out: Path, passages: int) -> None:
    import numpy as np

    from netcast.data import load_corpus

    real = load_corpus("hotpotqa-wide")[1]  # every bundled paragraph (HotpotQA and MuSiQue)
    sentences = [s for d in real for s in SENTENCE.split(d.text) if len(s.split()) >= 4]
    titles = [d.title for d in real if d.title]
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    tmp = out.with_suffix(".part")
    with tmp.open("w", encoding="utf-8") as handle:
        for d in real:
            handle.write(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n")
        for i in range(passages - len(real)):
            picks = rng.integers(0, len(sentences), size=int(rng.integers(3, 7)))
            title = f"{titles[int(rng.integers(0, len(titles)))]} ({i})"
            text = " ".join(sentences[int(j)] for j in picks)
            handle.write(json.dumps({"id": f"s{i}", "title": title, "text": text}) + "\n")
    tmp.rename(out)
    emit(step="generate", seconds=time.perf_counter() - start, real=len(real), total=passages)


def raw_bm25s(corpus: Path, out: Path) -> None:
    """What a user of bm25s alone would write: read the texts, tokenize, index, save."""
    import bm25s
    import Stemmer

    from netcast.corpus import format_passage

    start = time.perf_counter()
    with corpus.open(encoding="utf-8") as handle:
        texts = [format_passage(r["title"], r["text"]) for r in map(json.loads, handle)]
    tokens = bm25s.tokenize(
        texts, stopwords="en", stemmer=Stemmer.Stemmer("english"), show_progress=False
    )
    model = bm25s.BM25()
    model.index(tokens, show_progress=False)
    model.save(str(out))
    emit(step="raw", seconds=time.perf_counter() - start, passages=len(texts))


def build(corpus: Path, out: Path) -> None:
    from netcast.cli.app import app

    start = time.perf_counter()
    try:
        app(["index", "--corpus", str(corpus), "--out", str(out)], standalone_mode=False)
    finally:
        emit(step="build", seconds=time.perf_counter() - start)


def query(index: Path, questions: int) -> None:
    from netcast.data import load_dataset
    from netcast.retrievers import load_index

    asked = [ex.question for ex in load_dataset("hotpotqa-wide", "dev", questions).examples]
    start = time.perf_counter()
    retriever = load_index(index)
    load_s = time.perf_counter() - start
    retriever.search("warm up", 5)
    latencies = []
    for question in asked:
        start = time.perf_counter()
        hits = retriever.search(question, 5)
        latencies.append((time.perf_counter() - start) * 1000)
        assert len(hits) == 5
    emit(
        step="query",
        load_seconds=load_s,
        p50_ms=statistics.median(latencies),
        p95_ms=percentile(latencies, 95),
        queries=len(latencies),
        chunks=len(retriever.corpus),
    )


def ask(index: Path, program: str, question: str) -> None:
    import dspy

    from netcast.models import make_lm
    from netcast.retrievers import load_index
    from netcast.session import build_program

    lm = make_lm("embedded")
    start = time.perf_counter()
    prog = build_program(program, load_index(index), {}, lm=lm)
    with dspy.context(lm=lm):
        prediction = prog(question=question)
    emit(
        step=f"ask-{program}",
        seconds=time.perf_counter() - start,
        answer=prediction.answer,
        evidence=list(prediction.evidence)[:8],
        tokens_in=prediction.trace["tokens_in"],
    )


# --- the driver ---------------------------------------------------------------------------------


def run_step(*args: str) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), *args]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    results = [json.loads(x[7:]) for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode != 0 or not results:
        sys.exit(f"step {args[0]} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return results[-1]


def cached_step(work: Path, name: str, *args: str) -> dict:
    """Run a step once; its result is kept in ``work/name.json`` so a rerun resumes."""
    saved = work / f"{name}.json"
    if saved.exists():
        return json.loads(saved.read_text())
    result = run_step(*args)
    saved.write_text(json.dumps(result))
    return result


def dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/netcast-scale"))
    parser.add_argument("--queries", type=int, default=150)
    parser.add_argument("--ask", type=int, default=1, help="end-to-end questions (0: none)")
    args = parser.parse_args()
    work = args.work / str(args.passages)
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.jsonl"
    if not corpus.exists():
        run_step("generate", str(corpus), str(args.passages))
    raw = cached_step(work, "raw", "raw", str(corpus), str(work / "raw-bm25s"))
    built = cached_step(work, "build", "build", str(corpus), str(work / "index"))
    queried = run_step("query", str(work / "index"), str(args.queries))
    asked = []
    if args.ask:
        from netcast.data import load_dataset

        question = load_dataset("hotpotqa-wide", "dev", 1).examples[0]
        for program in ("basic", "one_shot"):
            asked.append(
                (
                    program,
                    question,
                    run_step("ask", str(work / "index"), program, question.question),
                )
            )

    n = queried["chunks"]
    header(
        f"BM25 at scale: {args.passages:,} passages ({n:,} chunks), "
        f"{queried['queries']} queries, k = 5",
        notes=[
            f"corpus: {corpus} ({corpus.stat().st_size / 1e6:,.0f} MB), every bundled paragraph "
            "plus their sentences recombined (seed 0); each step in its own process",
        ],
    )
    per_passage = built["seconds"] / args.passages
    rows = [
        ["raw bm25s (read, tokenize, index, save)", f"{raw['seconds']:.1f}", "1.00",
         f"{raw['peak_rss_mb'] / 1024:.2f}", f"{dir_mb(work / 'raw-bm25s'):,.0f}", "-", "-", "-"],
        ["netcast index --corpus", f"{built['seconds']:.1f}",
         f"{built['seconds'] / raw['seconds']:.2f}", f"{built['peak_rss_mb'] / 1024:.2f}",
         f"{dir_mb(work / 'index'):,.0f}", f"{queried['load_seconds']:.2f}",
         f"{queried['p50_ms']:.1f}", f"{queried['p95_ms']:.1f}"],
    ]  # fmt: skip
    table(
        ["build", "seconds", "x raw", "peak RSS GB", "on disk MB", "load s", "p50 ms", "p95 ms"],
        rows,
    )
    print(f"\nquery process peak RSS: {queried['peak_rss_mb'] / 1024:.2f} GB (load + queries)")
    disk = dir_mb(work / "index") / args.passages
    print("\nprojected linearly from the measured per-passage figures (build time, disk):")
    table(
        ["passages", "build (one process)", "index on disk"],
        [
            [f"{size:,}", f"{per_passage * size / 3600:.1f} h", f"{disk * size / 1e3:,.1f} GB"]
            for size in (10_000_000, 21_000_000)
        ],
    )
    for program, question, result in asked:
        print(
            f"\n{program} over the index: {question.question!r} -> {result['answer']!r} "
            f"(gold {question.answers[0]!r}; {result['seconds']:.1f} s, "
            f"{result['tokens_in']} tokens in; evidence {', '.join(result['evidence'][:5])})"
        )


STEPS = {
    "generate": lambda a: generate(Path(a[0]), int(a[1])),
    "raw": lambda a: raw_bm25s(Path(a[0]), Path(a[1])),
    "build": lambda a: build(Path(a[0]), Path(a[1])),
    "query": lambda a: query(Path(a[0]), int(a[1])),
    "ask": lambda a: ask(Path(a[0]), a[1], a[2]),
}

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in STEPS:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        STEPS[sys.argv[1]](sys.argv[2:])
    else:
        main()
