"""The commands that make and read artifacts: ``compile`` (an optimizer, a race, a recompile
with ``--from``), ``tune`` (Optuna over the knobs) and ``show``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from netcast.cli import options
from netcast.cli.options import (
    ApiBaseOpt,
    BudgetOpt,
    CompileDatasetOpt,
    DevLimitOpt,
    DevSplitOpt,
    FinetuneSetOpt,
    FromOpt,
    GridOpt,
    IndexOpt,
    JudgeModelOpt,
    KnobOpt,
    MetricOpt,
    ModelOpt,
    OptimizerOpt,
    RaceProgramOpt,
    RetriesOpt,
    RetuneOpt,
    RetuneTrialsOpt,
    SearchOpt,
    SeedOpt,
    SelectOnOpt,
    TeacherModelOpt,
    TeacherOpt,
    ThreadsOpt,
    TiesOpt,
    TimeoutOpt,
    TrainLimitOpt,
    TrainSplitOpt,
    given,
    knob_values,
    other_lm,
)
from netcast.errors import NetcastError
from netcast.optimize.settings import TuneSettings
from netcast.render import (
    console,
    print_table,
    score_table,
    study_table,
    trials_table,
)

# what an artifact's recipe holds: refused beside --from, which reruns the recipe as it is
RECIPE_HOLDS = ("program", "dataset", "train_split", "dev_split", "train_limit", "dev_limit")
RECIPE_HOLDS += ("optimizer", "metric", "teacher", "teacher_model", "judge_model", "budget")
RECIPE_HOLDS += ("grid", "ties", "finetune_set", "retriever", "index", "knob", "seed")


def compile_cmd(
    ctx: typer.Context,
    out: Annotated[Path, typer.Option(help="artifact directory to write")],
    program: RaceProgramOpt = "basic",
    dataset: CompileDatasetOpt = "hotpotqa-sample",
    train_split: TrainSplitOpt = "train",
    dev_split: DevSplitOpt = "dev",
    train_limit: TrainLimitOpt = 20,
    dev_limit: DevLimitOpt = 20,
    select_on: SelectOnOpt = None,
    optimizer: OptimizerOpt = "bootstrap",
    metric: MetricOpt = "f1",
    model: ModelOpt = None,
    teacher: TeacherOpt = "model",
    teacher_model: TeacherModelOpt = None,
    judge_model: JudgeModelOpt = None,
    budget: BudgetOpt = None,
    grid: GridOpt = None,
    ties: TiesOpt = None,
    finetune_set: FinetuneSetOpt = None,
    retriever: SearchOpt = None,
    index: IndexOpt = None,
    knob: KnobOpt = None,
    seed: SeedOpt = 0,
    threads: ThreadsOpt = None,
    from_dir: FromOpt = None,
    retune: RetuneOpt = False,
    trials: RetuneTrialsOpt = 6,
    api_base: ApiBaseOpt = None,
    retries: RetriesOpt = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Compile a program's prompts on a training split and save an artifact (or, with --from,
    recompile an artifact's recipe with another model)."""
    from netcast.files import check_output_directory
    from netcast.retrievers.store import kind_for_index

    _check_options(ctx, from_dir, retune, select_on)
    _check_ignored(ctx, program, optimizer, teacher, from_dir is not None)
    check_output_directory(out, "recipe.json", "artifact")  # not found out after the compile
    if from_dir is not None:
        lm = options.command_lm(model, api_base, retries, timeout=timeout)
        result, columns = _recompile(
            from_dir,
            out,
            (model, lm, lambda name: other_lm(name, api_base, retries, timeout)),
            select_on,
            retune,
            trials,
            threads,
        )
    else:
        recipe = _compile_recipe_of(
            program,
            knob,
            optimizer,
            metric,
            (budget, grid, ties),
            finetune_set,
            dataset=dataset,
            train_split=train_split,
            dev_split=dev_split,
            train_limit=train_limit,
            dev_limit=dev_limit,
            model=model,
            teacher_model=teacher_model,
            judge_model=judge_model,
            retriever=kind_for_index(retriever, index),
            index=index,
            seed=seed,
            select_on=select_on or "dev",
            teacher=teacher,
        )
        lm = options.command_lm(model, api_base, retries, timeout=timeout)
        teacher_lm, judge_lm = (
            other_lm(name, api_base, retries, timeout) if name else None
            for name in (teacher_model, judge_model)
        )
        result, columns = _compile(recipe, out, threads, lm, teacher_lm, judge_lm)
    _print_compiled(result, columns, out, teacher)


def _check_options(
    ctx: typer.Context, from_dir: Path | None, retune: bool, select_on: str | None
) -> None:
    """--from's options against the others, and --select-on's value (one line each)."""
    from netcast.optimize.compile import SELECT_ON

    if from_dir is not None and (held := given(ctx, RECIPE_HOLDS)):
        raise NetcastError(
            f"{held[0]}: --from reruns {from_dir}'s recipe as it holds it (--model, --select-on "
            "and --retune change it); to change the rest, compile without --from"
        )
    if from_dir is None and (rerun := given(ctx, ("retune", "trials"))):
        raise NetcastError(f"{rerun[0]} re-tunes an artifact's knobs: add --from DIR")
    if given(ctx, ("trials",)) and not retune:
        raise NetcastError("--trials counts --retune's tuning trials: add --retune")
    if select_on is not None and select_on not in SELECT_ON:
        raise NetcastError(
            f"unknown --select-on {select_on!r}; choose one of {', '.join(SELECT_ON)}"
        )
    if from_dir is not None and select_on is not None and not retune:
        _check_rerun_selects(from_dir, select_on)


def _compile(
    recipe: Any, out: Path, threads: int | None, lm: Any, teacher_lm: Any, judge_lm: Any = None
):
    """``netcast compile``: the recipe run, its artifact loaded back and scored; the result
    and the scores before, after and loaded back. ``threads`` (``--threads``): questions at
    once (None: 1) and a finetune's training threads (None: its settings' or every core)."""
    from netcast.optimize.workflow import compile_recipe
    from netcast.render import race_progress

    result = compile_recipe(
        recipe,
        out,
        threads=threads or 1,
        train_threads=threads,
        reload=True,
        lm=lm,
        teacher_lm=teacher_lm,
        judge_lm=judge_lm,
        report=race_progress,  # a race shows its progress live
    )
    winner = result.race["choice"]["winner"] if result.race else recipe.program
    columns = {
        f"{winner} at its defaults" if result.race else "uncompiled": result.before,
        "compiled": result.after,
        "loaded from artifact": result.reloaded,
    }
    return result, columns


def _compile_recipe_of(
    program: str,
    pairs: list[str] | None,
    optimizer: str,
    metric: str,
    search: tuple[int | None, list[str] | None, str | None],
    tuning: list[str] | None,
    **fields: Any,
):
    """The recipe ``netcast compile`` runs: ``--optimizer`` and ``--metric`` checked, the
    ``--set`` knobs (a race's are split among its programs when it starts), for a search
    (the joint compile, a race) its settings from ``search``: ``--budget``, ``--grid`` and
    ``--ties``, and a finetune's from ``tuning`` (``--finetune-set``)."""
    from netcast.optimize.compile import METRICS
    from netcast.optimize.race import is_race
    from netcast.optimize.registry import (
        compile_optimizer,
        get_optimizer,
        optimizer_names,
        options_settings,
    )
    from netcast.optimize.workflow import make_recipe
    from netcast.programs.knobs import parse_grid, parse_pairs

    if optimizer not in optimizer_names():
        choices = ", ".join(optimizer_names())
        raise NetcastError(f"unknown optimizer {optimizer!r}; choose one of {choices}")
    if metric not in METRICS:
        raise NetcastError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    racing = is_race(program)
    searching = racing or get_optimizer(optimizer).searches
    budget, grid, ties = search
    if grid and not searching:
        raise NetcastError("--grid names the values a joint compile tries: add --optimizer joint")
    if (budget is not None or ties is not None) and not searching:
        option = "--budget" if budget is not None else "--ties"
        raise NetcastError(f"{option} configures a search: add --optimizer joint or --program auto")
    if tuning and optimizer not in ("finetune", "better-together"):
        raise NetcastError("--finetune-set configures --optimizer finetune or better-together")
    entry = compile_optimizer(program, optimizer, fields.get("teacher", "model"))
    flat = parse_pairs(tuning or [])
    settings = options_settings(entry, budget, parse_grid(grid or []), ties, flat)
    return make_recipe(
        program=program,
        knobs=parse_pairs(pairs or []) if racing else knob_values(pairs, program),
        optimizer=optimizer,
        optimizer_settings=settings,
        metric=metric,
        **fields,
    )


def _check_ignored(
    ctx: typer.Context, program: str, optimizer: str, teacher: str, rerun: bool = False
) -> None:
    """One line for a compile option its optimizer would ignore: ``--optimizer`` beside a race
    (which runs its own search), ``--seed`` to an optimizer that takes none, ``--select-on`` to
    one that scores no candidates on a valset (with ``--from`` the recipe's optimizer decides)."""
    from netcast.optimize.race import is_race

    if is_race(program) and given(ctx, ("optimizer",)) and optimizer != "joint":
        raise NetcastError(
            f"--optimizer {optimizer}: --program {program} races the strategies, each with the "
            "joint search; drop --optimizer (compile the winner's recipe after)"
        )
    seeded = is_race(program) or teacher == "annotations" or optimizer not in UNSEEDED
    if given(ctx, ("seed",)) and not seeded:
        raise NetcastError(
            f"--seed: DSPy's {optimizer} takes no seed (the same training questions give the same "
            "demonstrations); a seed changes mipro, simba, gepa, joint, the race and finetunes"
        )
    selecting = _selecting()
    if (
        not rerun
        and given(ctx, ("select_on",))
        and (is_race(program) or optimizer not in selecting)
    ):
        what = f"--program {program}" if is_race(program) else f"--optimizer {optimizer}"
        raise NetcastError(
            f"--select-on: {what} scores no candidates on a valset (it selects on held-out "
            f"training questions or not at all); it applies to {', '.join(selecting)}"
        )


UNSEEDED = ("bootstrap", "bootstrap-rs")  # DSPy's optimizers that take no seed


def _selecting() -> tuple[str, ...]:
    """The optimizers that score candidates on a valset (``--select-on`` applies to them)."""
    from netcast.optimize.compile import SELECTING

    return (*SELECTING, "better-together")


def _check_rerun_selects(source: Path, select_on: str) -> None:
    """``compile --from DIR --select-on X`` without ``--retune``: one line where DIR's recipe
    runs an optimizer that scores no candidates on a valset (X would be recorded and change
    nothing)."""
    from netcast.artifacts import read_artifact

    name = (read_artifact(source)[0].get("optimizer") or {}).get("name")
    if name not in _selecting():
        raise NetcastError(
            f"--select-on {select_on}: {source}'s recipe runs {name}, which scores no "
            "candidates on a valset; drop --select-on (or add --retune, whose trials it sets)"
        )


def _recompile(
    source: Path,
    out: Path,
    models: tuple[str | None, Any, Any],
    select_on: str | None,
    retune: bool,
    trials: int,
    threads: int | None,
):
    """``netcast compile --from``: the artifact's recipe run again with ``models``: the
    ``--model`` name, its LM and how the recipe's teacher and judge models are built (with the
    command's endpoints and timeouts); its knobs re-tuned first with ``retune``. The result and
    the old and new scores."""
    from netcast.optimize.tune import retune_knobs
    from netcast.optimize.workflow import recompile
    from netcast.render import race_progress

    model, lm, make = models
    knobs = retune_knobs(source, lm, trials, select_on) if retune else None
    result, old = recompile(
        source,
        model,
        out,
        knobs=knobs,
        threads=threads or 1,
        train_threads=threads,
        lm=lm,
        select_on=select_on,
        report=race_progress,  # a race run again shows its progress live
        make=make,
    )
    return result, {f"{source} (old)": old.get("after"), f"{out} (new model)": result.after}


def _print_compiled(result: Any, columns: dict[str, Any], out: Path, teacher: str) -> None:
    """What a compile found (a race's table and choice, or a joint compile's trials and its
    test against the defaults), its scores, demonstrations and artifact."""
    from netcast.artifacts import read_artifact
    from netcast.render import (
        adapter_line,
        better_together_line,
        race_line,
        race_table,
        verdict_lines,
        versus_defaults_line,
    )

    if result.race:
        print_table(race_table(result.race))
        console.print(race_line(result.race), markup=False)
    elif result.trials:
        print_table(trials_table(result.trials))
        if line := versus_defaults_line(result.versus_defaults):
            console.print(line, markup=False)
        console.print(f"chosen knobs: {result.knobs}", markup=False)
        if result.untried:
            console.print(
                f"the budget of model calls left {result.untried} grid point(s) untried; their "
                f"trials wait beside {out}: the same command with a larger --budget goes on",
                markup=False,
                soft_wrap=True,
            )
    print_table(score_table(columns))
    for step, counts in (result.demos or {}).items():
        console.print(
            f"demonstrations for {step}: {counts['bootstrapped']} bootstrapped from successful "
            f"traces, {counts['labeled']} labeled from the training set"
            + (" (its annotations)" if teacher == "annotations" else "")
        )
    saved = read_artifact(result.artifact)[0]
    for line in (better_together_line(saved), adapter_line(saved)):
        if line:
            console.print(line, markup=False, soft_wrap=True)
    console.print(f"compiled in {result.seconds:.1f} s -> {result.artifact}", soft_wrap=True)
    if result.dev_f1:  # what the dev scores show, and what would decide it
        before, after = result.dev_f1
        compared = "its defaults" if result.race else "uncompiled"
        searched = bool(result.race or result.trials)
        for line in verdict_lines(before, after, compared=compared, searched=searched):
            console.print(line, markup=False, soft_wrap=True)


def tune(
    program: Annotated[str, typer.Option(help="strategy name")] = "basic",
    dataset: Annotated[str, typer.Option(help="dataset name or .jsonl")] = "hotpotqa-sample",
    trials: Annotated[
        int, typer.Option(help="finished trials the study should hold", min=1)
    ] = TuneSettings.trials,
    objectives: Annotated[
        str, typer.Option(help="quality[,cost]: f1,cost | f1,calls | em")
    ] = TuneSettings.objectives,
    compile_each: Annotated[
        bool, typer.Option(help="compile every trial's program")
    ] = TuneSettings.compile_each,
    optimizer: Annotated[str, typer.Option(help="with --compile-each")] = TuneSettings.optimizer,
    train_split: Annotated[str, typer.Option()] = "train",
    dev_split: Annotated[str, typer.Option()] = "dev",
    train_limit: Annotated[Optional[int], typer.Option()] = 20,  # noqa: UP045
    dev_limit: Annotated[Optional[int], typer.Option()] = 20,  # noqa: UP045
    model: ModelOpt = None,
    retriever: SearchOpt = None,
    index: IndexOpt = None,
    storage: Annotated[
        str,
        typer.Option(
            help="Optuna storage URL; postgresql://... lets several workers share one study"
        ),
    ] = TuneSettings.storage,
    study: Annotated[Optional[str], typer.Option(help="study name")] = None,  # noqa: UP045
    pick_rule: Annotated[
        str, typer.Option("--pick", help="best-quality | knee | max-quality-under-cost=X")
    ] = TuneSettings.pick_rule,
    out: Annotated[
        Optional[Path], typer.Option(help="export the picked trial as an artifact")  # noqa: UP045
    ] = None,
    seed: Annotated[int, typer.Option()] = 0,
    heartbeat: Annotated[
        int, typer.Option(help="seconds; stale trials are retried", min=1)
    ] = TuneSettings.heartbeat,
    api_base: ApiBaseOpt = None,
    retries: RetriesOpt = None,
    timeout: TimeoutOpt = None,
) -> None:
    """Tune a program's knobs with Optuna (quality vs cost); resumable; distributable."""
    from netcast.files import check_output_directory
    from netcast.optimize.tune import run_tuning, tuning_recipe
    from netcast.programs import get_program
    from netcast.retrievers.store import kind_for_index

    get_program(program)
    settings = TuneSettings(
        trials=trials,
        objectives=objectives,
        compile_each=compile_each,
        optimizer=optimizer,
        storage=storage,
        study=study,
        pick_rule=pick_rule,
        heartbeat=heartbeat,
    )
    if out is not None:
        check_output_directory(out, "recipe.json", "artifact")
    lm = options.command_lm(model, api_base, retries, timeout=timeout)
    recipe = tuning_recipe(
        program,
        dataset,
        lm,
        settings,
        train_split=train_split,
        dev_split=dev_split,
        train_limit=train_limit,
        dev_limit=dev_limit,
        retriever=kind_for_index(retriever, index),
        index=str(index) if index is not None else None,
        seed=seed,
    )
    result = run_tuning(recipe, lm, out)
    print_table(study_table(result))
    if result.artifact is not None:
        console.print(
            f"trial {result.chosen.number} ({pick_rule}) -> {result.artifact}", soft_wrap=True
        )


def show(directory: Annotated[Path, typer.Argument(help="an artifact directory")]) -> None:
    """Show an artifact's recipe, scores and lineage."""
    from netcast.artifacts import read_artifact
    from netcast.inputs import check_recipe
    from netcast.render import (
        adapter_line,
        artifact_table,
        better_together_line,
        race_line,
        race_table,
        versus_defaults_line,
    )

    recipe, scores, meta = read_artifact(directory)
    check_recipe(directory, recipe)
    print_table(artifact_table(str(directory), recipe, meta))
    joint = recipe.get("joint") or {}
    if recipe.get("race"):  # a strategy race, as `netcast compile` printed it
        print_table(race_table(recipe["race"]))
        console.print(race_line(recipe["race"]), markup=False)
    if joint.get("trials"):  # a joint compile's search, as `netcast compile` printed it
        print_table(trials_table(joint["trials"]))
        if line := versus_defaults_line(joint.get("versus_defaults")):
            console.print(line, markup=False)
        if joint.get("untried"):
            console.print(f"{joint['untried']} grid point(s) left untried by the budget")
    for line in (better_together_line(recipe), adapter_line(recipe)):
        if line:
            console.print(line, markup=False, soft_wrap=True)
    print_table(score_table({"before": scores.get("before"), "after": scores.get("after")}))
