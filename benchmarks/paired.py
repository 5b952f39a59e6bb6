"""Compare two runs on the questions they share (e.g. the same strategy on two models, which
are two bench directories): mean F1 of each, the paired difference with its 95% bootstrap
interval, and the paired sign-flip test of ``netcast report``; seconds per question of each.

    .venv/bin/python benchmarks/paired.py A/predictions.jsonl B/predictions.jsonl
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from netcast.optimize.report import Results, paired


def rows(path: Path) -> dict[str, dict]:
    lines = path.read_text().splitlines()
    return {row["id"]: row for row in (json.loads(line) for line in lines if line.strip())}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--measure", default="f1")
    args = parser.parse_args()
    a, b = rows(args.a), rows(args.b)
    ids = [i for i in a if i in b]
    if not ids:
        raise SystemExit(f"{args.a} and {args.b} share no question ids")
    test = paired(
        Results("", "B", list(b.values())), Results("", "A", list(a.values())), args.measure
    )
    mean_a = sum(a[i]["scores"][args.measure] for i in ids) / len(ids)
    mean_b = sum(b[i]["scores"][args.measure] for i in ids) / len(ids)
    mean, low, high = test["diff"]
    print(f"n = {test['n']} shared questions")
    print(f"{args.measure}: A {mean_a:.3f}, B {mean_b:.3f}")
    print(f"B - A: {mean:+.3f} [95% CI {low:+.3f}, {high:+.3f}], p = {test['p']:.4f}")
    for name, run in (("A", a), ("B", b)):
        seconds = sum(run[i]["scores"]["seconds"] for i in ids) / len(ids)
        print(f"{name} seconds/question: {seconds:.1f}")


if __name__ == "__main__":
    main()
