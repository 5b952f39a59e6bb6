"""Running a paper's ablation spec and rebuilding its tables: each configuration runs on the
same questions into its own resumable folder (:func:`run_ablation`), the spec's judge is asked
once about each saved answer (its verdicts kept in ``judge.jsonl`` beside the rows), and
:func:`ablation_report` builds the paper's tables (``registry.TABLES``) from the rows and
verdicts, without a model call."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dspy

from netcast.errors import InputError
from netcast.specs.model import (
    ConfigEntry,
    MakeLM,
    Spec,
    SpecRun,
    header_lines,
    lm_kwargs,
    saved_rows,
)
from netcast.specs.papers.common import Ablation, Run, record_field
from netcast.specs.papers.registry import TABLES

JUDGE_FILE = "judge.jsonl"


class WithContext(dspy.Module):
    """Runs ``program`` and keeps the text it hands the generator (the prediction's context)
    in the saved trace (a ``context`` stage), so retrieval F1 can be computed from saved rows."""

    def __init__(self, program: dspy.Module):
        super().__init__()
        self.program = program
        self.name = program.name
        self.knobs = program.knobs
        self.knob_defaults = program.knob_defaults

    def forward(self, question: str) -> dspy.Prediction:
        prediction = self.program(question=question)
        prediction.trace["stages"].append(
            {"stage": "context", "passages": [str(p) for p in prediction.context or []]}
        )
        return prediction


# --- running and reporting --------------------------------------------------------------------


def full_knobs(program: str, knobs: dict[str, Any]) -> dict[str, Any]:
    from netcast.programs import get_program
    from netcast.programs.knobs import validate

    return validate(program, get_program(program).Knobs, knobs)


def run_info(config: ConfigEntry, model: str) -> dict[str, Any]:
    """What a configuration's folder holds (``run.json``): label, program, every knob, model,
    and the retriever and per-step models where they are not the default."""
    info: dict[str, Any] = {
        "label": config.label,
        "program": config.program,
        "knobs": full_knobs(config.program, dict(config.knobs)),
        "model": model,
    }
    if config.retriever != "bm25":
        info["retriever"] = config.retriever
    if config.step_models:
        info["step_models"] = dict(config.step_models)
    return info


def read_verdicts(folder: Path, judge: str, kind: str) -> dict[str, float | None]:
    """The saved verdicts of ``judge`` (``kind``: score or match) on a folder's answers."""
    return {
        str(item["id"]): item["value"]
        for item in saved_rows(folder / JUDGE_FILE)
        if item.get("judge") == judge and item.get("kind") == kind
    }


def ask_judge(example: dspy.Example, answer: str, judge_lm: Any, kind: str) -> float | None:
    """One verdict: the binary LLM Match (``JudgeAnswer``) or the 0-100 score (``ScoreAnswer``,
    clamped); None when the judge's reply gives none."""
    from dspy.utils.exceptions import AdapterParseError

    from netcast.evaluation.evaluate import judge_match
    from netcast.models import default_adapter
    from netcast.signatures.judge import ScoreAnswer

    try:
        with dspy.context(lm=judge_lm, adapter=default_adapter(judge_lm)):
            if kind == "match":
                return judge_match(example, answer, judge_lm)
            out = dspy.Predict(ScoreAnswer)(
                question=example.question,
                reference_answers=list(example.answers),
                predicted_answer=answer,
            )
        return float(min(100, max(0, int(out.score))))
    except (AdapterParseError, TypeError, ValueError):
        return None


def judge_missing(
    folder: Path,
    rows: Sequence[dict],
    examples: Sequence[dspy.Example],
    judge: str,
    judge_lm: Any,
    kind: str,
) -> int:
    """Ask ``judge_lm`` (recorded as ``judge``) about every saved answer it has no verdict on;
    each verdict is appended to the folder's ``judge.jsonl`` as it comes (a stopped run
    resumes). Returns how many it asked."""
    done = read_verdicts(folder, judge, kind)
    by_id = {ex.id: ex for ex in examples}
    asked = 0
    with (folder / JUDGE_FILE).open("a", encoding="utf-8") as out:
        for row in rows:
            if row["id"] in done or row["id"] not in by_id:
                continue
            value = ask_judge(by_id[row["id"]], str(row["answer"] or ""), judge_lm, kind)
            item = {"id": row["id"], "judge": judge, "kind": kind, "value": value}
            out.write(json.dumps(item) + "\n")
            out.flush()
            asked += 1
    return asked


def judge_name(spec: Spec) -> str | None:
    """The judge as its verdicts record it (its netcast model name), None without one."""
    from netcast.models import model_name

    return model_name(spec.file.judge) if spec.file.judge else None


def run_ablation(spec: Spec, make: MakeLM, threads: int = 1, progress: bool = True) -> SpecRun:
    """Run an ablation spec's configurations (resuming: saved questions are kept), then ask its
    judge about the answers it has not judged."""
    from netcast.data import load_dataset
    from netcast.evaluation.evaluate import evaluate
    from netcast.models import model_name, token_counter
    from netcast.models.factory import check_questions, preflight
    from netcast.session import build_program, open_retriever

    table_ = TABLES[spec.file.table]
    f = spec.file
    if f.judge and model_name(f.judge) == model_name(f.model) and not f.allow_same_judge:
        raise InputError(
            f"{spec.path}: field 'judge': {f.judge} is the model under test; the papers judge "
            "with a separate model (allow_same_judge = true to let it judge its own answers)"
        )
    data = load_dataset(f.dataset, f.split, f.limit)
    wanted = {ex.id for ex in data.examples}
    judged = judge_name(spec) if table_.judge else None
    if all(
        wanted <= {r["id"] for r in run.rows} and (not judged or wanted <= set(run.verdicts))
        for run in read_runs(spec)
    ):
        return SpecRun(spec)  # every question run and judged: no model is made
    lm = make(f.model, **lm_kwargs(spec))
    check_questions(data.questions(), lm)
    preflight(lm)
    judge_lm = make(f.judge) if f.judge and table_.judge else None
    if judge_lm is not None:
        preflight(judge_lm)
    retrievers: dict[str, Any] = {}
    done = SpecRun(spec)
    for config in f.configs:
        if config.retriever not in retrievers:
            retrievers[config.retriever] = open_retriever(
                data, kind=config.retriever, counter=token_counter(lm)
            )
        program = build_program(config.program, retrievers[config.retriever], config.knobs, lm=lm)
        for step, model in config.step_models.items():
            step_lm = make(model)
            for name, predictor in program.named_predictors():
                if name.split(".")[0] == step:
                    predictor.lm = step_lm
        runner = WithContext(program) if table_.records_context else program
        folder = spec.run_dir / config.folder
        if progress:
            print(
                f"[{spec.name}] {config.label}: {len(data.examples)} questions -> {folder}",
                flush=True,
            )
        with dspy.context(lm=lm):
            result = evaluate(
                runner,
                data.examples,
                run_dir=folder,
                run_info=run_info(config, lm.model),
                threads=threads,
                progress=progress,
            )
        if judge_lm is not None and table_.judge:
            judge_missing(folder, result.rows, data.examples, judged or "", judge_lm, table_.judge)
        done.results.append((config.label, result, lm))
    return done


def read_runs(spec: Spec) -> list[Run]:
    """The saved rows of every configuration of an ablation spec (a configuration not yet run
    has none), with the judge's verdicts where the table has a judge."""
    table_ = TABLES[spec.file.table]
    judge = judge_name(spec) if table_.judge else None
    runs = []
    for config in spec.file.configs:
        folder = spec.run_dir / config.folder
        rows = saved_rows(folder / "predictions.jsonl")
        verdicts = read_verdicts(folder, judge, table_.judge or "") if judge else {}
        runs.append(
            Run(
                config.label,
                config.program,
                full_knobs(config.program, dict(config.knobs)),
                rows,
                verdicts,
                config.retriever,
                dict(config.step_models),
            )
        )
    return runs


def ablation_report(spec: Spec) -> str:
    """An ablation spec's tables from its saved rows and verdicts (no model call)."""
    table_ = TABLES[spec.file.table]
    runs = read_runs(spec)
    lines = [*header_lines(spec), f"Tables: {table_.title}.", ""]
    done = [r for r in runs if r.rows]
    missing = [r.label for r in runs if not r.rows]
    if missing:
        lines += [f"Not run yet: {'; '.join(missing)} (`{spec.command('bench')}`).", ""]
    if not done:
        return "\n".join(lines) + "\n"
    levels = record_field(spec.file.dataset, "level")
    ab = Ablation(spec, done, spec.options, levels)
    return "\n".join(lines + table_.build(ab)) + "\n"
