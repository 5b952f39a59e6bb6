"""Where the gold-passage gap is, and what the link hop (programs/shared/links.py) puts in the
context, without a model.

1. ``--rows DIR``: from a bench run directory's committed rows (no model call), F1 of each row
   split by how many of the question's gold passages ``basic``'s context held, beside the
   gold-passage reference row on the same questions: where the gap to the ceiling sits.
   ``--against ROW`` adds the same split by both ``basic``'s and ROW's gold recall: which
   questions a change of context completed or broke.
2. Retrieval alone, on a split's questions (by default the training split: a setting chosen
   here has not looked at dev): the share of questions whose context holds every gold passage,
   gold recall, and passages per question, for plain top-k and top-k plus up to L linked
   passages; and milliseconds per question of the hop.

    .venv/bin/python benchmarks/links.py --dataset hotpotqa-wide --split train
    .venv/bin/python benchmarks/links.py --rows benchmarks/results/decisive-wide-0.5b \\
        --dataset hotpotqa-wide --split train --against basic-links-2
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from _common import header, table


def run_rows(run_dir: Path, dataset: str, needed: tuple[str, ...] = ("basic",)) -> dict:
    """Each row's predictions of a bench run directory by question id; ``needed`` rows exist."""
    folder = run_dir / dataset
    rows = {}
    for path in sorted(folder.glob("*/predictions.jsonl")):
        with path.open(encoding="utf-8") as handle:
            rows[path.parent.name] = {r["id"]: r for r in map(json.loads, handle)}
    for name in needed:
        if name not in rows:
            raise SystemExit(f"{folder}: no {name} rows")
    return rows


def mean_f1(rows: dict, ids: list[str]) -> str:
    return f"{sum(rows[i]['scores']['f1'] for i in ids) / len(ids):.3f}"


def gap_table(run_dir: Path, dataset: str) -> None:
    """F1 of every row by basic's gold recall (0, half, all of the gold passages)."""
    rows = run_rows(run_dir, dataset)
    names = ["basic", *sorted(n for n in rows if n != "basic")]
    groups: dict[float, list[str]] = defaultdict(list)
    for qid, row in rows["basic"].items():
        groups[row["scores"]["recall"]].append(qid)
    header(
        f"F1 by the gold passages basic's context held ({dataset}, {run_dir})",
        ["rows: the committed predictions.jsonl of each program; n = questions in the group"],
    )
    out = []
    for recall in sorted(groups):
        ids = groups[recall]
        cells = []
        for name in names:
            have = [rows[name][i]["scores"]["f1"] for i in ids if i in rows[name]]
            cells.append(f"{sum(have) / len(have):.3f}" if len(have) == len(ids) else "-")
        out.append([f"{recall:.2f}", len(ids), *cells])
    table(["basic's gold recall", "n", *names], out)


def against_table(run_dir: Path, dataset: str, name: str) -> None:
    """F1 of basic, ``name`` and the gold-passage row by (basic's, ``name``'s) gold recall."""
    rows = run_rows(run_dir, dataset, ("basic", name, "reference-gold"))
    basic, other, gold = rows["basic"], rows[name], rows["reference-gold"]
    groups: dict[tuple[float, float], list[str]] = defaultdict(list)
    for qid in basic.keys() & other.keys() & gold.keys():
        groups[(basic[qid]["scores"]["recall"], other[qid]["scores"]["recall"])].append(qid)
    header(f"F1 by basic's and {name}'s gold recall ({dataset}, {run_dir})")
    out = [
        [
            f"{a:.2f}",
            f"{b:.2f}",
            len(ids),
            mean_f1(basic, ids),
            mean_f1(other, ids),
            mean_f1(gold, ids),
        ]
        for (a, b), ids in sorted(groups.items())
    ]
    table(["basic's recall", f"{name}'s recall", "n", "basic", name, "reference-gold"], out)


def retrieval_table(dataset: str, split: str, limit: int | None, k_values, links) -> None:
    from netcast.corpus import doc_id_of_chunk
    from netcast.data import load_dataset
    from netcast.programs.shared.links import follow, title_keys
    from netcast.session import open_retriever

    data = load_dataset(dataset, split, limit)
    examples = [e for e in data.examples if e.get("gold_ids")]
    retriever = open_retriever(data)
    start = time.perf_counter()
    titles = title_keys(retriever.corpus)
    build = time.perf_counter() - start
    header(
        f"The link hop, retrieval only ({dataset}/{split}, n = {len(examples)}, BM25)",
        [
            f"corpus: {len(retriever.corpus):,} chunks, {len(titles.keys):,} title keys "
            f"(built in {build:.2f} s)",
            "both gold: share of questions whose context holds every gold passage",
        ],
    )
    out = []
    for k in k_values:
        for extra in links:
            full, recall, size, seconds = 0, 0.0, 0, 0.0
            for e in examples:
                hits = retriever.search(e.question, k)
                start = time.perf_counter()
                linked = follow(hits, retriever.corpus, len(hits), extra) if extra else []
                seconds += time.perf_counter() - start
                docs = {doc_id_of_chunk(h.chunk.id) for h in [*hits, *linked]}
                found = sum(g in docs for g in e.gold_ids) / len(e.gold_ids)
                full += found == 1
                recall += found
                size += len(hits) + len(linked)
            n = len(examples)
            out.append(
                [
                    f"top {k} + links {extra}",
                    f"{full / n:.2f}",
                    f"{recall / n:.3f}",
                    f"{size / n:.2f}",
                    f"{1000 * seconds / n:.2f}",
                ]
            )
    table(["context", "both gold", "gold recall", "passages/q", "hop ms/q"], out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dataset", default="hotpotqa-wide")
    parser.add_argument("--split", default="train")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--k", default="3,5", help="top-k values, comma-separated")
    parser.add_argument("--links", default="0,1,2,3", help="links values, comma-separated")
    parser.add_argument("--rows", type=Path, help="a bench run directory: the gap table too")
    parser.add_argument("--against", action="append", default=[], help="with --rows: a row")
    args = parser.parse_args()
    if args.rows:
        gap_table(args.rows, args.dataset)
        for name in args.against:
            against_table(args.rows, args.dataset, name)
    k_values = [int(v) for v in args.k.split(",")]
    links = [int(v) for v in args.links.split(",")]
    retrieval_table(args.dataset, args.split, args.limit, k_values, links)


if __name__ == "__main__":
    main()
