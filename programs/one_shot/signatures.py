import dspy


class CropChunk(dspy.Signature):
    """Copy, word for word, only the sentences of the passage that help answer the question.
    Do not rephrase, shorten or add anything. If no sentence helps answer the question, write
    NONE."""

    question: str = dspy.InputField()
    passage: str = dspy.InputField()
    relevant_sentences: str = dspy.OutputField(
        desc="sentences copied verbatim from the passage, or NONE"
    )
