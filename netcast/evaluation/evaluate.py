"""Evaluate a program on examples: answer and retrieval quality plus cost, per question and
on average, in parallel with DSPy's executor, resumable through a run directory."""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from statistics import mean
from typing import Any

import dspy
from dspy.utils.parallelizer import ParallelExecutor

from netcast import interrupts
from netcast.errors import one_line
from netcast.evaluation import metrics
from netcast.evaluation.runlog import RunLog
from netcast.signatures import JudgeAnswer


@dataclass
class EvalResult:
    rows: list[dict[str, Any]]
    aggregate: dict[str, Any]
    errors: dict[str, str] = field(default_factory=dict)  # question id -> one line
    run_dir: Path | None = None
    raised: dict[str, BaseException] = field(default_factory=dict)  # question id -> exception


def judge_match(example: dspy.Example, answer: str, judge_lm: Any) -> float:
    """LLM-judge answer match (1.0 or 0.0) with ``judge_lm``."""
    with dspy.context(lm=judge_lm):
        verdict = dspy.Predict(JudgeAnswer)(
            question=example.question, gold_answers=list(example.answers), predicted_answer=answer
        )
    return float(bool(verdict.match))


def score(example: dspy.Example, prediction: dspy.Prediction, judge_lm: Any = None) -> dict:
    """Quality and cost of one prediction, cost read from its trace."""
    answer = str(prediction.answer or "")
    retrieval = metrics.retrieval_prf(prediction.evidence, example.gold_ids)
    trace = prediction.trace
    steps = trace.get("steps", {}).values()
    return {
        "em": metrics.exact_match(answer, example.answers),
        "f1": metrics.f1_score(answer, example.answers),
        "judge": judge_match(example, answer, judge_lm) if judge_lm is not None else None,
        "recall": retrieval["recall"],
        "precision": retrieval["precision"],
        "retrieval_f1": retrieval["f1"],
        "answer_in_context": metrics.answer_in_context(prediction.context, example.answers),
        "lm_calls": trace["lm_calls"],
        "cached_calls": trace["cached_calls"],
        "tokens_in": trace["tokens_in"],
        "tokens_out": trace["tokens_out"],
        "searches": len(trace["searches"]),
        "turns": len(trace["turns"]),
        "seconds": trace["seconds"],
        "parse_failures": sum(s["parse_failures"] for s in steps),
        "fallbacks": sum(s["fallbacks"] for s in steps),
    }


def question_row(example: dspy.Example, prediction: dspy.Prediction, judge_lm: Any = None):
    return {
        "id": example.id,
        "question": example.question,
        "answers": list(example.answers),
        "answer": prediction.answer,
        "evidence": list(prediction.evidence),
        "gold_ids": list(example.gold_ids),
        "scores": score(example, prediction, judge_lm),
        "trace": prediction.trace,
    }


def aggregate(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means over questions; a metric that is ``None`` for a question is left out of its mean."""
    result: dict[str, Any] = {"n": len(rows)}
    for name in metrics.BY_NAME:
        values = [r["scores"][name] for r in rows if r["scores"].get(name) is not None]
        result[name] = mean(values) if values else None
    result.update(step_totals(rows))
    return result


def step_totals(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-step counts summed over questions (``steps``), and the rates that read them: parse
    failures per 100 step calls, and the share of rule checks a step's outputs passed."""
    totals: dict[str, dict[str, Any]] = {}
    counted: dict[str, set[str]] = {}  # per step, the counters every row of it has
    for row in rows:
        for name, counts in (row.get("trace") or {}).get("steps", {}).items():
            mine = totals.setdefault(name, {"reasons": Counter()})
            counted[name] = counted.get(name, set(counts)) & set(counts)
            for key, value in counts.items():
                if key == "reasons":
                    mine["reasons"].update(value)
                else:
                    mine[key] = mine.get(key, 0) + value
    for name, mine in totals.items():  # a counter some rows predate is unknown, not partial
        for key in set(mine) - counted[name] - {"reasons"}:
            del mine[key]
        mine["reasons"] = dict(mine["reasons"])
    calls = sum(s.get("calls", 0) for s in totals.values())
    failures = sum(s.get("parse_failures", 0) for s in totals.values())
    accepted = sum(s.get("accepted", 0) for s in totals.values())
    checked = accepted + sum(s.get("rejected", 0) for s in totals.values())
    return {
        "steps": totals,
        "parse_failures_per_100_calls": 100 * failures / calls if calls else None,
        "acceptance": accepted / checked if checked else None,
    }


def program_info(program: dspy.Module) -> dict[str, Any]:
    """What a run directory records of ``program`` where the caller names nothing
    (``run_info``): its name and knobs, its model, and one sha256 over its steps' prompts
    (instructions and demonstrations), so the directory resumes only the same program."""
    steps = {
        name: [p.signature.instructions, [dict(demo) for demo in p.demos]]
        for name, p in program.named_predictors()
    }
    prompts = json.dumps(steps, sort_keys=True, default=str).encode()
    lm = next((p.lm for p in program.predictors() if p.lm is not None), None) or dspy.settings.lm
    knobs = getattr(program, "knobs", None)
    return {
        "program": getattr(program, "name", type(program).__name__),
        **({"knobs": knobs.model_dump()} if hasattr(knobs, "model_dump") else {}),
        "model": getattr(lm, "model", None),
        "prompts": hashlib.sha256(prompts).hexdigest(),
    }


# the least time between two progress lines: a short evaluation (a compile's scoring, a smoke
# run) writes none
PROGRESS_GAP = 30.0


class ProgressLines:
    """Where stdout is not a terminal (a log, a pipe) DSPy draws no bar: a plain line (on
    stderr, or to ``out``) every twentieth of the questions this run has to answer and at its
    last, when ``gap`` seconds (``PROGRESS_GAP``) have passed since the run's start or its last
    line: the questions done of all (those a resumed run read back counted), the time this run
    took and the time left at its pace. ``clock``: the time source (monotonic)."""

    def __init__(
        self,
        total: int,
        todo: int,
        clock: Callable[[], float] = time.monotonic,
        out=None,
        gap: float | None = None,
    ):
        self.total, self.todo, self.clock = total, todo, clock
        self.out = out or (lambda text: print(text, file=sys.stderr, flush=True))
        self.gap = PROGRESS_GAP if gap is None else gap
        self.every = max(1, todo // 20)
        self.finished = 0
        self.start = self.last = clock()
        self._lock = threading.Lock()

    def __call__(self, answered: bool = True) -> None:
        """One more question done; ``answered=False``: it failed, counted but never the
        occasion of a line (a command that stops on it ends with its one error line)."""
        with self._lock:
            self.finished += 1
            now = self.clock()
            due = self.finished % self.every == 0 or self.finished == self.todo
            if not answered or not due or now - self.last < self.gap:
                return
            self.last = now
            spent = now - self.start
            left = spent / self.finished * (self.todo - self.finished)
            done = self.total - self.todo + self.finished
            self.out(
                f"  {done}/{self.total} questions, {timedelta(seconds=int(spent))} elapsed, "
                f"eta {timedelta(seconds=int(left))}"
            )


def evaluate(
    program: dspy.Module,
    examples: Sequence[dspy.Example],
    *,
    run_dir: str | Path | None = None,
    run_info: dict[str, Any] | None = None,
    threads: int = 1,
    judge_lm: Any = None,
    progress: bool = True,
    max_errors: int = 3,
) -> EvalResult:
    """Run ``program`` on ``examples``; with ``run_dir``, each finished question is saved at
    once and questions already saved there are not run again.

    ``run_info``: what the run directory records of the run, so that it resumes only the same
    run (a different one is refused); by default the program's name, knobs, model and prompts
    (``program_info``).

    ``progress``: DSPy's progress bar on a terminal, ``ProgressLines`` elsewhere.

    Up to ``max_errors`` failing questions are tolerated (reported in ``errors``, not saved, so
    a rerun retries them); past that the run stops, keeping what finished.
    """
    defaults = getattr(program, "knob_defaults", None)
    defaults = defaults() if callable(defaults) else None
    if run_dir is not None and run_info is None:
        run_info = program_info(program)
    read_knobs = getattr(program, "stored_knobs", None)
    log = RunLog(run_dir, run_info or {}, defaults, read_knobs) if run_dir is not None else None
    done = log.rows if log is not None else {}
    by_id = {ex.id: ex for ex in examples}
    todo = [ex.id for ex in examples if ex.id not in done]
    fresh: dict[str, dict[str, Any]] = {}
    on_terminal = sys.stdout.isatty()
    lines = ProgressLines(len(examples), len(todo)) if progress and not on_terminal else None

    def run_one(example_id: str):
        example = by_id[example_id]
        row = None
        try:
            with interrupts.running("question"):  # a Ctrl-C waits for it: its row is saved
                row = question_row(example, program(question=example.question), judge_lm)
                if log is not None:
                    log.append(row)
        finally:  # a failed question is done too (the run's count and pace include it)
            if lines is not None:
                lines(answered=row is not None)
        fresh[example_id] = row
        return row, row["scores"]["f1"]

    executor = ParallelExecutor(
        num_threads=threads,
        max_errors=max_errors + 1,
        # DSPy draws its bar on stdout: only on a terminal, since in a log it is
        # carriage-return noise between a command's own lines (tqdm's ``disable=None``)
        disable_progress_bar=not (progress and on_terminal),
        provide_traceback=False,
        compare_results=True,
        timeout=0,  # no straggler re-submission: each question runs exactly once
    )
    errors: dict[str, str] = {}
    raised: dict[str, BaseException] = {}
    if todo:
        try:
            executor.execute(run_one, todo)
        except Exception as err:
            if "cancelled" not in str(err):
                raise
        for index, exc in executor.exceptions_map.items():
            errors[todo[index]] = one_line(exc)
            raised[todo[index]] = exc
    rows = [done.get(ex.id) or fresh.get(ex.id) for ex in examples]
    rows = [r for r in rows if r is not None]
    summary = aggregate(rows)
    summary["n_errors"] = len(errors)
    summary["n_total"] = len(examples)
    if log is not None:
        log.write_aggregate(summary)
    return EvalResult(rows, summary, errors, log.dir if log else None, raised)
