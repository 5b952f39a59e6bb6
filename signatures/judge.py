"""LLM-as-a-judge steps used by evaluation and the paper-table scripts.

``JudgeAnswer`` is the binary "LLM Match" of Test-Time Strategies for More Efficient and Accurate
Agentic RAG (§4.1.5): "the model is given both the predicted answer and a set of ground truth
answers, and is instructed to determine whether the predicted answer is semantically equivalent
to any of the gold answers. Minor differences in phrasing are permitted as long as the predicted
answer conveys the same meaning. The prompt directs the model to assign a binary score: 1 if the
predicted answer is semantically equivalent to the ground truth, and 0 if it is incomplete or
diverges in meaning. The evaluation explicitly focuses on semantic similarity, independent of
factual correctness." It is what ``netcast.evaluation.evaluate.judge_match`` asks.

``ScoreAnswer`` is the 0-100 judge score of Fishing for Answers (§4.1, Evaluation Setting): "an
LLM-as-a-judge evaluation framework to assess answer quality across multiple dimensions including
factual accuracy, completeness, and relevance ... The evaluation scores are normalized to a 0-100
scale"."""

import dspy


class JudgeAnswer(dspy.Signature):
    """Decide whether the predicted answer is semantically equivalent to any of the gold answers
    for this question. Minor differences in phrasing are permitted as long as the predicted
    answer conveys the same meaning (e.g. "2" and "Two", "950 Pesos" and "P950", a name written
    in full or abbreviated). Score 1 (True) if the predicted answer is semantically equivalent to
    a gold answer, and 0 (False) if it is incomplete or diverges in meaning: an answer that gives
    only part of what the gold answer says, names a different entity, date or number, hedges
    between several answers, or adds claims the gold answer does not make does not match. Judge
    semantic equivalence only, not whether either answer is factually true."""

    question: str = dspy.InputField()
    gold_answers: list[str] = dspy.InputField()
    predicted_answer: str = dspy.InputField()
    match: bool = dspy.OutputField(
        desc="True only if the prediction is semantically equivalent to a gold answer and "
        "complete; False if it is incomplete or diverges in meaning"
    )


class ScoreAnswer(dspy.Signature):
    """Evaluate the predicted answer to the question against the reference answers for factual
    accuracy (does it state what the references state), completeness (does it give all of it)
    and relevance (does it answer this question, without unrelated content). Give one score
    from 0 to 100: 100 for a fully correct, complete and relevant answer, 0 for a wrong,
    missing or irrelevant one, values in between for partly correct or partly complete ones."""

    question: str = dspy.InputField()
    reference_answers: list[str] = dspy.InputField()
    predicted_answer: str = dspy.InputField()
    score: int = dspy.OutputField(desc="an integer from 0 to 100")
