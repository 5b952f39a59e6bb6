import dspy

# Output tokens DSPy's field markers take around a reply ("[[ ## answer ## ]]" ...
# "[[ ## completed ## ]]", or a JSON object's braces and key); added to a step's content limit.
FORMAT_TOKENS = 20
# An answer step's limit: IterKey's 50 tokens (Table 14) for a short span, plus the markers.
ANSWER_TOKENS = 50 + FORMAT_TOKENS


class AnswerQuestion(dspy.Signature):
    """Answer the question using only the context passages. Give a short answer: a name, date,
    number or a few words, copied from the passages where possible; "yes" or "no" for yes/no
    questions."""

    context: list[str] = dspy.InputField(desc="retrieved passages, each 'title: text'")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="a short answer, a few words at most")
