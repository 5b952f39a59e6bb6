"""The DSPy internals netcast relies on, checked against the installed DSPy: optimize/finetune.py
subclasses BootstrapFinetune and BetterTogether and overrides private methods of theirs. When a
DSPy upgrade changes one of them, this test says which, and where netcast depends on it, before
a compile misbehaves quietly."""

import inspect
import re
from pathlib import Path

import dspy
import pytest

ROOT = Path(__file__).resolve().parents[2]
PINNED = re.search(r'"dspy==([^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)


def broken(what: str, used: str) -> str:
    return (
        f"DSPy {dspy.__version__} (pyproject pins {PINNED}) changed {what}, which {used} "
        "relies on: read DSPy's change and adapt it there"
    )


def test_the_installed_dspy_is_the_pinned_one():
    assert dspy.__version__ == PINNED, broken("its version", "every check in this file")


def test_bootstrap_finetune_prepares_data_as_netcast_finetune_overrides_it():
    """NetcastFinetune._prepare_finetune_data filters the traces, sets the adapter per LM,
    then calls DSPy's with (trace_data, lm, pred_ind) and reads (data, data_format) back."""
    where = "NetcastFinetune._prepare_finetune_data (optimize/finetune.py)"
    method = dspy.BootstrapFinetune._prepare_finetune_data
    params = list(inspect.signature(method).parameters)
    assert params == ["self", "trace_data", "lm", "pred_ind"], broken(
        "BootstrapFinetune._prepare_finetune_data's parameters", where
    )
    init = set(inspect.signature(dspy.BootstrapFinetune.__init__).parameters)
    wanted = {"metric", "multitask", "train_kwargs", "exclude_demos", "num_threads"}
    assert wanted <= init, broken("BootstrapFinetune's constructor", "NetcastFinetune.__init__")

    lm = dspy.LM("scripted/contract")
    tuner = dspy.BootstrapFinetune(metric=None)
    assert tuner.adapter[lm] is None, broken("BootstrapFinetune.adapter (a dict per LM)", where)
    assert isinstance(tuner.train_kwargs[lm], dict | type(None)), broken(
        "BootstrapFinetune.train_kwargs (a dict per LM)", where
    )
    tuner.adapter[lm] = dspy.ChatAdapter()
    step = dspy.Predict("question -> answer")
    trace = [(step, {"question": "Which river?"}, dspy.Prediction(answer="the Seine"))]
    data, data_format = method(tuner, [{"trace": trace, "score": 1.0}], lm)
    assert len(data) == 1 and "messages" in data[0], broken(
        "what _prepare_finetune_data returns (one chat a traced call)", where
    )
    assert data_format is not None, broken("_prepare_finetune_data's data format", where)


def test_a_failed_prediction_is_still_dspys_bootstrap_trace_failed_prediction():
    from dspy.teleprompt import bootstrap_trace

    assert hasattr(bootstrap_trace, "FailedPrediction"), broken(
        "dspy.teleprompt.bootstrap_trace.FailedPrediction",
        "NetcastFinetune._prepare_finetune_data's filter of unreadable replies",
    )


def test_better_together_runs_each_step_through_the_method_netcast_records_failures_in():
    """RecordingBetterTogether overrides BetterTogether._run_and_evaluate_step to keep a
    step's failure (DSPy logs it and goes on); FinetuneCompile passes optimizer_compile_args
    and deletes the candidate_programs and flag_compilation_error_occurred DSPy sets on the
    program."""
    where = "RecordingBetterTogether and FinetuneCompile (optimize/finetune.py)"
    together = dspy.BetterTogether
    assert callable(getattr(together, "_run_and_evaluate_step", None)), broken(
        "BetterTogether._run_and_evaluate_step", where
    )
    source = inspect.getsource(together)
    assert "self._run_and_evaluate_step(" in source, broken(
        "where BetterTogether calls _run_and_evaluate_step", where
    )
    assert "optimizer_compile_args" in inspect.signature(together.compile).parameters, broken(
        "BetterTogether.compile's optimizer_compile_args", where
    )
    for attribute in ("candidate_programs", "flag_compilation_error_occurred"):
        assert f".{attribute} = " in source, broken(f"the {attribute} it sets", where)


@pytest.mark.parametrize("name", ["NetcastFinetune", "RecordingBetterTogether"])
def test_netcasts_subclasses_override_only_methods_dspy_still_has(name):
    """Every private method of netcast's subclasses of DSPy's optimizers overrides one of
    DSPy's: one DSPy renamed or dropped would never be called again."""
    from netcast.optimize import finetune

    cls = getattr(finetune, name)
    base = next(b for b in cls.__mro__[1:] if b.__module__.startswith("dspy"))
    own = [m for m in vars(cls) if m.startswith("_") and not m.startswith("__")]
    missing = [m for m in own if callable(vars(cls)[m]) and not hasattr(base, m)]
    assert missing == [], broken(f"{base.__name__} ({', '.join(missing)} gone)", name)
