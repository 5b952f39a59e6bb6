"""The test-time contextualization step (memory notes), shared by every agent that searches."""

import dspy


class Contextualize(dspy.Signature):
    """Read the new passages and write down, as short self-contained notes, only the
    information that helps answer the question and is not already in the memory. If nothing
    new helps, return an empty list []."""

    question: str = dspy.InputField()
    memory: list[str] = dspy.InputField(desc="notes already kept; do not repeat them")
    new_passages: list[str] = dspy.InputField()
    new_notes: str = dspy.OutputField(desc="a JSON list of new notes, or [] if nothing new helps")
