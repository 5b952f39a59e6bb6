"""Basic RAG: retrieve the top-k chunks for the question, answer from them."""

from __future__ import annotations

import dspy

from netcast.programs import knobs
from netcast.programs.base import NetcastProgram
from netcast.programs.registry import register
from netcast.signatures import ANSWER_TOKENS, AnswerQuestion


@register
class BasicRAG(NetcastProgram):
    name = "basic"

    class Knobs(knobs.Knobs):
        top_k: int = knobs.knob(5, search=knobs.IntRange(1, 10), ge=1)
        chain_of_thought: bool = knobs.knob(False, search=knobs.Choice((False, True)))

    def __init__(self, retriever=None, *, lm=None, **knob_values):
        super().__init__(retriever, lm=lm, **knob_values)
        if self.knobs["chain_of_thought"]:
            self.answer = dspy.ChainOfThought(AnswerQuestion)
        else:  # a short span: the output is capped (reasoning, when on, is not)
            self.answer = dspy.Predict(AnswerQuestion, max_tokens=ANSWER_TOKENS)

    def forward(self, question: str) -> dspy.Prediction:
        hits = self.search(question, self.knobs["top_k"])
        context = self.passages(hits)
        answer = self.answer(context=context, question=question).answer
        return dspy.Prediction(answer=answer, evidence=[h.chunk.id for h in hits], context=context)
