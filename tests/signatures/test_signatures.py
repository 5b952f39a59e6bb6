import dspy

from netcast.signatures import AnswerQuestion, JudgeAnswer


def test_signatures_declare_their_fields_and_instructions():
    assert list(AnswerQuestion.input_fields) == ["context", "question"]
    assert list(AnswerQuestion.output_fields) == ["answer"]
    assert "context passages" in AnswerQuestion.instructions
    assert JudgeAnswer.output_fields["match"].annotation is bool


def test_judge_parses_a_boolean_verdict(scripted_lm):
    scripted_lm(lambda prompt: {"match": "True"})
    verdict = dspy.Predict(JudgeAnswer)(
        question="Capital of France?", gold_answers=["Paris"], predicted_answer="paris, France"
    )
    assert verdict.match is True


def test_the_judge_is_binary_and_strict_about_incomplete_answers():
    from netcast.signatures.judge import ScoreAnswer

    instructions = JudgeAnswer.instructions
    assert "semantically equivalent" in instructions
    assert "0 (False) if it is incomplete or diverges in meaning" in instructions
    assert "extra detail" not in instructions.lower()  # no longer accepted as a match
    assert "incomplete" in JudgeAnswer.output_fields["match"].json_schema_extra["desc"]
    assert ScoreAnswer.output_fields["score"].annotation is int
    assert "0 to 100" in ScoreAnswer.instructions


def test_score_judge_parses_an_integer(scripted_lm):
    from netcast.signatures.judge import ScoreAnswer

    scripted_lm(lambda prompt: {"score": "85"})
    out = dspy.Predict(ScoreAnswer)(
        question="Capital of France?", reference_answers=["Paris"], predicted_answer="Paris"
    )
    assert out.score == 85
