"""IterKey's ``stop_when_valid`` knob (the paper's Table 9 setting: iterate up to max_iters even
after a True)."""

from netcast.programs import IterKey


def script(verdicts):
    """Validation replies from ``verdicts`` in order; answers numbered per call."""
    verdicts = list(verdicts)
    answers = {"n": 0}

    def respond(prompt):
        if "[[ ## is_correct ## ]]" in prompt and "[[ ## answer ## ]]\n" in prompt:
            return {"is_correct": verdicts.pop(0)}
        if "[[ ## previous_keywords ## ]]" in prompt:
            return {"keywords": '["Seine", "river"]'}
        if "[[ ## context ## ]]" in prompt:
            answers["n"] += 1
            return {"answer": f"answer {answers['n']}"}
        return {"keywords": '["Paris", "capital"]'}

    return respond, verdicts


def test_default_stops_at_the_first_true(scripted_lm, bm25):
    respond, left = script(["False", "True", "False", "True", "False"])
    scripted_lm(respond)
    prediction = IterKey(bm25, validation="text")(question="capital of France?")
    assert IterKey(bm25).knobs.stop_when_valid is True
    assert prediction.iterations == 2 and prediction.answer == "answer 2"
    assert len(left) == 3  # three verdicts never asked for


def test_iterates_after_a_true_and_returns_the_first_validated_answer(scripted_lm, bm25):
    respond, left = script(["False", "True", "False", "True", "False"])
    scripted_lm(respond)
    program = IterKey(bm25, validation="text", stop_when_valid=False)
    prediction = program(question="capital of France?")
    assert prediction.iterations == 5 and not left  # every iteration ran
    turns = prediction.trace["turns"]
    assert [t["iteration"] for t in turns] == [1, 2, 3, 4, 5]
    assert [t["valid"] for t in turns] == [False, True, False, True, False]
    assert [t["answer"] for t in turns] == [f"answer {i}" for i in range(1, 6)]
    # the answer is the paper's 'Base': the first validated one, not the last
    assert prediction.validated and prediction.answer == "answer 2"
    assert prediction.evidence == turns[1]["retrieved"]


def test_without_any_true_the_on_fail_rule_still_applies(scripted_lm, bm25):
    respond, _ = script(["False"] * 3)
    scripted_lm(respond)
    program = IterKey(bm25, validation="text", stop_when_valid=False, max_iters=3)
    prediction = program(question="capital of France?")
    assert prediction.iterations == 3 and not prediction.validated
    assert prediction.answer == "answer 3"
