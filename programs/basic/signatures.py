"""``basic``'s own step beside the shared answer step: the second hop's query."""

from __future__ import annotations

import dspy


class WriteNextQuery(dspy.Signature):
    """Read the passages found for a multi-hop question and write the search that finds the
    passage still missing to answer it: the name of the entity that passage is about (a person,
    place, work or group the passages name as the link to the answer, or the question's other
    subject). Write only the name, no question."""

    context: list[str] = dspy.InputField(desc="passages 'title: text' found for the question")
    question: str = dspy.InputField()
    query: str = dspy.OutputField(desc="the missing passage's title, a few words")
