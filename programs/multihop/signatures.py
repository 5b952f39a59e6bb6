"""The steps of DSPy's multi-hop program, with the intro tutorial's instructions and field
descriptions (``GenerateSearchQuery``, ``GenerateAnswer``), typed: the context is a list of
passages."""

import dspy


class GenerateSearchQuery(dspy.Signature):
    """Write a simple search query that will help answer a complex question."""

    context: list[str] = dspy.InputField(
        desc="may contain relevant facts; passages 'title: text' found by earlier hops"
    )
    question: str = dspy.InputField()
    query: str = dspy.OutputField()


class GenerateAnswer(dspy.Signature):
    """Answer questions with short factoid answers."""

    context: list[str] = dspy.InputField(desc="may contain relevant facts")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="often between 1 and 5 words")
