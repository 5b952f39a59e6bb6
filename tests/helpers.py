"""Test helpers: a word token counter, a scripted fake model, a tiny document set."""

from __future__ import annotations

import re

from netcast.corpus import Document
from netcast.testing import ScriptedEngine, chat_output

__all__ = [
    "DOCS",
    "ScriptedEngine",
    "WordCounter",
    "chat_output",
    "last_question",
    "scoring_lm",
]


class WordCounter:
    """A deterministic token counter for tests: one token per whitespace-separated word."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


def last_question(prompt: str) -> str:
    """The value of the last ``[[ ## question ## ]]`` field in a ChatAdapter prompt."""
    found = re.findall(r"\[\[ ## question ## \]\]\n(.*?)(?:\n\n|\n\[\[|$)", prompt, re.S)
    return found[-1].strip() if found else ""


DOCS = [
    Document("paris", "Paris", "Paris is the capital and largest city of France."),
    Document("berlin", "Berlin", "Berlin is the capital of Germany and its largest city."),
    Document(
        "eiffel", "Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris."
    ),
    Document("rhine", "Rhine", "The Rhine river flows through Germany and the Netherlands."),
    Document("seine", "Seine", "The Seine is a river that flows through Paris in France."),
    Document("louvre", "Louvre", "The Louvre is the world's most-visited art museum, in Paris."),
]


def scoring_lm(respond, favour):
    """A scripted model (replies from ``respond``) that also scores passages for the likelihood
    rerank signal: the question's mean log-probability given a passage is ``favour(passage)``."""
    import dspy

    from netcast.models.factory import use_netcast_cache

    class Scoring(ScriptedEngine):
        def continuation_logprobs(self, context, continuation):
            return [favour(context)], 1

    use_netcast_cache()
    return dspy.LM("scripted/scoring", engine=Scoring(respond), cache=False, num_retries=0)
