import pytest

from helpers import ScriptedEngine
from netcast.errors import InputError
from netcast.programs import IterKey


def iterkey_script(verdicts, keywords=None):
    """Validation replies from ``verdicts`` in order; keyword lists numbered per call."""
    verdicts = list(verdicts)
    calls = {"generate": 0, "regenerate": 0, "document": 0, "answer": 0}

    def respond(prompt):
        if "[[ ## is_correct ## ]]" in prompt and "[[ ## answer ## ]]\n" in prompt:
            return {"is_correct": verdicts.pop(0)}
        if "[[ ## document ## ]]" in prompt:
            calls["document"] += 1
            return {"keywords": f'["doc term {calls["document"]}"]'}
        if "[[ ## previous_keywords ## ]]" in prompt:
            calls["regenerate"] += 1
            return {"keywords": (keywords or {}).get(calls["regenerate"], '["Seine", "river"]')}
        if "[[ ## context ## ]]" in prompt:
            calls["answer"] += 1
            return {"answer": f"answer {calls['answer']}"}
        calls["generate"] += 1
        return {"keywords": '```json\n["Paris", "capital", "Paris"]\n```'}

    return respond, calls


def turns(prediction):
    return prediction.trace["turns"]


def test_stops_at_the_first_true(scripted_lm, bm25):
    script, calls = iterkey_script(["True"])
    _, engine = scripted_lm(script)
    prediction = IterKey(bm25, validation="text")(question="What is the capital of France?")
    assert prediction.answer == "answer 1" and prediction.validated and prediction.iterations == 1
    assert calls["regenerate"] == 0 and prediction.trace["lm_calls"] == 3
    first = turns(prediction)[0]
    assert first["keywords"] == ["Paris", "capital"]  # parsed from fenced JSON, deduplicated
    assert (
        prediction.trace["searches"][0]["query"] == "What is the capital of France? Paris capital"
    )
    assert first["retrieved"] == prediction.evidence and first["valid"] is True


def test_regenerates_on_false_with_the_previous_keywords_in_the_prompt(scripted_lm, bm25):
    script, calls = iterkey_script(["False", "False", "True"])
    _, engine = scripted_lm(script)
    prediction = IterKey(bm25, validation="text", k=2)(question="Which river flows through Paris?")
    assert prediction.iterations == 3 and calls["regenerate"] == 2
    regen_prompts = [p for p in engine.prompts if "[[ ## previous_keywords ## ]]" in p]
    assert '"Paris"' in regen_prompts[0] and '"capital"' in regen_prompts[0]
    assert '"Seine"' in regen_prompts[1]  # the second regeneration sees the first's keywords
    t = turns(prediction)
    assert [x["valid"] for x in t] == [False, False, True]
    assert t[1]["keywords"] == ["Seine", "river"] and t[1]["new_keywords"] == ["Seine", "river"]
    assert t[2]["new_keywords"] == []  # same keywords again: nothing new
    assert all(set(x["new_docs"]) <= set(x["retrieved"]) for x in t)
    assert prediction.answer == "answer 3"


def test_max_iters_and_what_to_return_when_nothing_validates(scripted_lm, bm25):
    script, _ = iterkey_script(["False"] * 5)
    scripted_lm(script)
    prediction = IterKey(bm25, validation="text", max_iters=3)(question="capital of France?")
    assert prediction.iterations == 3 and not prediction.validated
    assert prediction.answer == "answer 3"  # on_fail="last"


class LogprobEngine(ScriptedEngine):
    """A scripted model that also answers forced-decoding requests with fixed P(True)s."""

    def __init__(self, script, p_trues):
        super().__init__(script)
        self.p_trues = list(p_trues)
        self.forced = []

    def next_token_logprobs(self, messages, prefix, candidates):
        import math

        self.forced.append((messages, prefix))
        p = self.p_trues.pop(0)
        verdict = {"true": math.log(p), "false": math.log(1 - p)}
        return {c: verdict[c.strip().lower()] for c in candidates}, 100


def forced_lm(scripted_lm, p_trues):
    import dspy

    script, _ = iterkey_script([])
    scripted_lm(script)  # own cache dir, ChatAdapter
    engine = LogprobEngine(script, p_trues)
    dspy.configure(lm=dspy.LM("scripted/logprobs", engine=engine, cache=False, num_retries=0))
    return engine


def test_forced_decoding_decides_from_logprobs_and_threshold(scripted_lm, bm25):
    engine = forced_lm(scripted_lm, [0.3, 0.4])
    prediction = IterKey(bm25, validation="logprobs", threshold=0.35)(question="capital?")
    assert [t["p_true"] for t in turns(prediction)] == pytest.approx([0.3, 0.4])
    assert [t["valid"] for t in turns(prediction)] == [False, True]
    messages, prefix = engine.forced[0]
    assert prefix == "[[ ## is_correct ## ]]\n" and "[[ ## answer ## ]]" in messages[-1]["content"]
    # the verdicts never went through text generation
    assert not any("[[ ## is_correct ## ]]" in p for p in engine.prompts)


def test_on_fail_best_returns_the_most_probable_answer(scripted_lm, bm25):
    forced_lm(scripted_lm, [0.2, 0.45, 0.1])
    program = IterKey(bm25, validation="logprobs", threshold=0.9, max_iters=3, on_fail="best")
    prediction = program(question="capital?")
    assert not prediction.validated and prediction.answer == "answer 2"


def test_document_by_document_regeneration(scripted_lm, bm25):
    script, calls = iterkey_script(["False", "True"])
    scripted_lm(script)
    prediction = IterKey(bm25, validation="text", k=2, variant="doc_by_doc")(
        question="capital of France?"
    )
    assert calls["document"] == 2 and calls["regenerate"] == 0
    assert turns(prediction)[1]["keywords"] == ["doc term 1", "doc term 2"]


def test_cot_variant_reasons_before_validating(scripted_lm, bm25):
    def script(prompt):
        if "[[ ## is_correct ## ]]" in prompt and "[[ ## answer ## ]]\n" in prompt:
            return {"reasoning": "The documents say so.", "is_correct": "True"}
        if "[[ ## context ## ]]" in prompt:
            return {"answer": "Paris"}
        return {"keywords": '["Paris"]'}

    _, engine = scripted_lm(script)
    prediction = IterKey(bm25, validation="text", variant="cot")(question="capital of France?")
    assert prediction.validated and any("[[ ## reasoning ## ]]" in p for p in engine.prompts)


def test_bad_knobs(bm25):
    with pytest.raises(InputError, match="iterkey: knob 'variant' = 'magic'"):
        IterKey(bm25, variant="magic")
    with pytest.raises(InputError, match="iterkey: knob 'validation' = 'vibes'"):
        IterKey(bm25, validation="vibes")
    with pytest.raises(InputError, match="iterkey: knob 'threshold' = 1.5"):
        IterKey(bm25, threshold=1.5)


def test_forced_decoding_asks_the_model_the_program_is_bound_to(scripted_lm, bm25):
    import dspy

    script, _ = iterkey_script([])
    scripted_lm(script)  # own cache dir
    dspy.configure(lm=None)  # as after netcast.load: the program has its own LM, DSPy none
    engine = LogprobEngine(script, [0.8])
    program = IterKey(bm25, validation="logprobs")
    program.set_lm(dspy.LM("scripted/logprobs", engine=engine, cache=False, num_retries=0))
    prediction = program(question="capital?")
    assert prediction.validated and engine.forced and engine.prompts
    assert prediction.trace["lm_calls"] == len(engine.prompts) + len(engine.forced)


def test_the_papers_settings_are_the_defaults(bm25):
    program = IterKey(bm25)
    assert program.knobs.validation == "logprobs" and program.knobs.threshold == 0.5
    assert "your own\nknowledge" in program.answer.signature.instructions
    limits = {name: p.config.get("max_tokens") for name, p in program.named_predictors()}
    assert limits["generate"] == limits["answer"] == 70 and limits["validate"] == 50


class SilentEngine(LogprobEngine):
    """Forced decoding where neither verdict is a likely next token."""

    def next_token_logprobs(self, messages, prefix, candidates):
        self.forced.append((messages, prefix))
        return {c: float("-inf") for c in candidates}, 100


def test_missing_verdict_logprobs_validate_nothing(scripted_lm, bm25):
    import dspy

    script, _ = iterkey_script([])
    scripted_lm(script)
    engine = SilentEngine(script, [])
    dspy.configure(lm=dspy.LM("scripted/silent", engine=engine, cache=False, num_retries=0))
    prediction = IterKey(bm25, max_iters=2, threshold=0.0)(question="capital?")
    assert not prediction.validated and prediction.iterations == 2
    assert prediction.trace["steps"]["validate_next_token"]["fallbacks"] == 2


def test_on_fail_best_in_text_mode_keeps_the_latest_answer(scripted_lm, bm25):
    script, _ = iterkey_script(["False"] * 3)
    scripted_lm(script)
    program = IterKey(bm25, validation="text", max_iters=3, on_fail="best")
    assert program(question="capital?").answer == "answer 3"


def test_a_compile_gives_the_forced_decoding_validator_demos_that_enter_its_prompt(
    scripted_lm, bm25
):
    import dspy

    engine = forced_lm(scripted_lm, [0.9] * 4)
    trainset = [
        dspy.Example(question="capital of France?", answers=["answer 1"]).with_inputs("question")
    ]
    optimizer = dspy.BootstrapFewShot(
        metric=lambda example, prediction, trace=None: prediction.validated,
        max_bootstrapped_demos=1,
        max_labeled_demos=0,
    )
    compiled = optimizer.compile(IterKey(bm25, validation="logprobs"), trainset=trainset)
    demos = compiled.validate_next_token.demos
    assert len(demos) == 1 and demos[0]["is_correct"] is True
    assert demos[0]["answer"] == "answer 1" and demos[0]["question"] == "capital of France?"

    engine.forced.clear()
    compiled(question="Which river flows through Paris?")
    messages, _ = engine.forced[0]
    shown = "\n".join(m["content"] for m in messages[:-1])
    assert "capital of France?" in shown and "answer 1" in shown  # the demo is in the prompt
    assert "Which river flows through Paris?" in messages[-1]["content"]
