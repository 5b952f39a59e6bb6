"""Compare two runs on the questions they share (e.g. the same strategy on two models, which
are two bench directories): mean F1 of each, the paired difference with its 95% bootstrap
interval, and the paired sign-flip test of ``netcast report``; seconds per question of each.

    .venv/bin/python benchmarks/paired.py A/predictions.jsonl B/predictions.jsonl

``--by-context`` adds the same comparison within four groups of the shared questions: the gold
answer in both runs' contexts, only in A's, only in B's, in neither (``answer_in_context``).
``--by-answer`` splits them by the gold answer instead: yes/no questions and the rest, with
how often each run answered "yes" and "no" on the yes/no ones. The groups are chosen after the
fact: read them as a description, not as tests.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from netcast.specs.report import Results
from netcast.specs.report import compare as compare_results


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
    parser.add_argument("--by-context", action="store_true", help="split by answer_in_context")
    parser.add_argument("--by-answer", action="store_true", help="split yes/no questions off")
    args = parser.parse_args()
    a, b = rows(args.a), rows(args.b)
    ids = [i for i in a if i in b]
    if not ids:
        raise SystemExit(f"{args.a} and {args.b} share no question ids")
    test, mean_a, mean_b = compare(a, b, ids, args.measure)
    mean, low, high = test["diff"]
    print(f"n = {test['n']} shared questions")
    print(f"{args.measure}: A {mean_a:.3f}, B {mean_b:.3f}")
    print(f"B - A: {mean:+.3f} [95% CI {low:+.3f}, {high:+.3f}], p = {test['p']:.4f}")
    for name, run in (("A", a), ("B", b)):
        seconds = sum(run[i]["scores"]["seconds"] for i in ids) / len(ids)
        print(f"{name} seconds/question: {seconds:.1f}")
    if args.by_context:
        by_context(a, b, ids, args.measure)
    if args.by_answer:
        by_answer(a, b, ids, args.measure)


def compare(a: dict, b: dict, ids: list[str], measure: str) -> tuple[dict, float, float]:
    """``netcast report``'s paired test of B against A on the questions ``ids``, and the mean
    of ``measure`` in A and in B over them."""
    test = compare_results(
        Results("", "B", [b[i] for i in ids]), Results("", "A", [a[i] for i in ids]), measure
    )
    mean_a = sum(a[i]["scores"][measure] for i in ids) / len(ids)
    mean_b = sum(b[i]["scores"][measure] for i in ids) / len(ids)
    return test, mean_a, mean_b


def by_context(a: dict, b: dict, ids: list[str], measure: str) -> None:
    """The comparison within the groups of questions whose gold answer was in the context of
    both runs, only A's, only B's, or neither."""

    def held(run: dict, i: str) -> bool:
        return bool(run[i]["scores"].get("answer_in_context"))

    groups = {
        "both": [i for i in ids if held(a, i) and held(b, i)],
        "only A": [i for i in ids if held(a, i) and not held(b, i)],
        "only B": [i for i in ids if held(b, i) and not held(a, i)],
        "neither": [i for i in ids if not held(a, i) and not held(b, i)],
    }
    group_table("answer in context", groups, a, b, measure)


YES_NO = ("yes", "no")


def by_answer(a: dict, b: dict, ids: list[str], measure: str) -> None:
    """The comparison on the yes/no questions (gold answer "yes" or "no") and on the rest, and
    how often each run answered "yes" and "no" on the yes/no ones."""

    def gold(i: str) -> str:
        answers = a[i].get("answers") or [""]
        return str(answers[0]).strip().lower()

    yes_no = [i for i in ids if gold(i) in YES_NO]
    groups = {"yes/no": yes_no, "other": [i for i in ids if gold(i) not in YES_NO]}
    group_table("gold answer", groups, a, b, measure)
    if yes_no:
        print(f"\nyes/no questions: gold {_said(yes_no, gold)}")
        for name, run in (("A", a), ("B", b)):
            print(f"{name} answered {_said(yes_no, lambda i, r=run: _first_word(r[i]))}")


def _first_word(row: dict) -> str:
    words = str(row.get("answer", "")).strip().lower().split()
    return words[0].strip(".,!") if words else ""


def _said(ids: list[str], word) -> str:
    counts = {w: sum(word(i) == w for i in ids) for w in YES_NO}
    other = len(ids) - sum(counts.values())
    return f"yes {counts['yes']}, no {counts['no']}, other {other}"


def group_table(title: str, groups: dict[str, list[str]], a: dict, b: dict, measure: str) -> None:
    """One row per group of question ids: A's and B's mean ``measure`` and the paired test."""
    print(f"\n| {title} | n | A {measure} | B {measure} | B - A [95% CI] | p |")
    print("|---|---|---|---|---|---|")
    for name, group in groups.items():
        if not group:
            print(f"| {name} | 0 | - | - | - | - |")
            continue
        test, mean_a, mean_b = compare(a, b, group, measure)
        mean, low, high = test["diff"]
        print(
            f"| {name} | {len(group)} | {mean_a:.3f} | {mean_b:.3f} | "
            f"{mean:+.3f} [{low:+.3f}, {high:+.3f}] | {test['p']:.3f} |"
        )


if __name__ == "__main__":
    main()
