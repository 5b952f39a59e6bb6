"""LM usage is counted by a DSPy callback for any LM: a plain ``dspy.LM`` over a fake backend
reports its calls, cache hits and tokens in ``prediction.trace``."""

import dspy

from helpers import ScriptedEngine, chat_output
from netcast import trace
from netcast.models import usage
from netcast.models.factory import use_netcast_cache
from netcast.programs import BasicRAG


def plain_lm(engine, cache):
    use_netcast_cache()  # this test's own, empty DSPy cache
    return dspy.LM("scripted/plain", engine=engine, cache=cache, num_retries=0)


def test_a_program_on_a_plain_lm_reports_calls_and_tokens(bm25):
    engine = ScriptedEngine(lambda prompt: {"answer": "Paris"})
    program = BasicRAG(bm25, top_k=2)
    program.set_lm(plain_lm(engine, cache=False))
    prediction = program(question="What is the capital of France?")
    t = prediction.trace
    assert (t["lm_calls"], t["cached_calls"]) == (1, 0)
    assert t["tokens_in"] == len(engine.prompts[0].split()) > 0  # the engine's own usage
    assert t["tokens_out"] == len(chat_output({"answer": "Paris"}).split())


def test_a_cached_call_is_counted_as_cached_with_the_tokens_it_took(bm25):
    engine = ScriptedEngine(lambda prompt: {"answer": "Paris"})
    program = BasicRAG(bm25, top_k=2)
    program.set_lm(plain_lm(engine, cache=True))
    first = program(question="What is the capital of France?").trace
    second = program(question="What is the capital of France?").trace
    assert len(engine.prompts) == 1  # the second call came from DSPy's cache
    assert (first["lm_calls"], first["cached_calls"]) == (1, 0)
    assert (second["lm_calls"], second["cached_calls"]) == (1, 1)
    assert second["tokens_in"] == first["tokens_in"] > 0
    assert second["tokens_out"] == first["tokens_out"] > 0


def test_bare_predictors_are_counted_inside_counting_only(scripted_lm):
    lm, engine = scripted_lm(lambda prompt: {"answer": "Paris"})
    predict = dspy.Predict("question -> answer")
    with trace.recording() as outside:
        predict(question="Capital of France?")
    with trace.recording() as inside, usage.counting():
        predict(question="Capital of France?")
        with usage.counting():  # nested: the callback is not added twice
            predict(question="Capital of Germany?")
    assert outside.lm_calls == 0
    assert inside.lm_calls == 2 and inside.tokens_in == sum(
        len(p.split()) for p in engine.prompts[1:]
    )
    assert usage.USAGE not in (dspy.settings.get("callbacks") or [])  # switched off again


def test_calls_outside_a_recording_are_not_counted_anywhere(scripted_lm):
    scripted_lm(lambda prompt: {"answer": "Paris"})
    with usage.counting():
        assert dspy.Predict("question -> answer")(question="q").answer == "Paris"
    assert trace.current() is None


def test_usage_tokens_reads_native_litellm_and_list_shapes():
    class Native:
        class usage:
            input_tokens = 7
            output_tokens = 2

    assert usage.usage_tokens(Native()) == (7, 2)
    assert usage.usage_tokens({"usage": {"prompt_tokens": 7, "completion_tokens": 2}}) == (7, 2)
    assert usage.usage_tokens([Native(), {"usage": {"prompt_tokens": 1}}]) == (8, 2)
    assert usage.usage_tokens(None) == (0, 0)


class TruncatingEngine(ScriptedEngine):
    """Replies cut at the token limit (``finish_reason="length"``) when the question asks."""

    def complete(self, request):
        import dataclasses

        reply = super().complete(request)
        cut = "LONG" in self.prompts[-1]
        return dataclasses.replace(reply, finish_reason="length") if cut else reply


def test_a_reply_cut_at_the_token_limit_is_counted_for_its_step(bm25):
    engine = TruncatingEngine(lambda prompt: {"answer": "Paris"})
    program = BasicRAG(bm25, top_k=2)
    program.set_lm(plain_lm(engine, cache=False))
    cut = program(question="LONG: what is the capital of France?").trace["steps"]["answer"]
    whole = program(question="What is the capital of France?").trace["steps"]["answer"]
    assert (cut["calls"], cut["truncated"]) == (1, 1)
    assert (whole["calls"], whole["truncated"]) == (1, 0)


def test_finish_reasons_reads_native_litellm_and_list_shapes():
    native = type("R", (), {"finish_reason": "length"})()
    litellm = {"choices": [{"finish_reason": "stop"}, {"finish_reason": "length"}]}
    assert usage.finish_reasons(native) == ["length"]
    assert usage.finish_reasons(litellm) == ["stop", "length"]
    assert usage.finish_reasons([native, {"choices": []}, None]) == ["length"]
