"""Test helpers: a word token counter, a scripted fake model, a tiny document set."""

from __future__ import annotations

import json
import re

from netcast.corpus import Document
from netcast.testing import ScriptedEngine, chat_output

__all__ = [
    "DOCS",
    "ScriptedEngine",
    "WordCounter",
    "capitals_file",
    "chat_output",
    "distracted",
    "last_question",
    "scoring_lm",
    "tiny_base",
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


def tiny_base(model_path):
    """In place of the embedded model in training (``training.load_base``): a 2-block random
    Qwen2 with the real vocabulary (the examples are real tokens), trained in seconds."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=151_936,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    return Qwen2ForCausalLM(config)


# the joint compile's scripted data (tests/optimize/test_joint.py and the CLI's tests)
PASSAGES = [
    ("Paris", "Paris is the capital and largest city of France.", True),
    ("Berlin", "Berlin is the capital of Germany and its largest city.", False),
    ("Rome", "Rome is the capital city of Italy.", False),
    ("Madrid", "Madrid is the capital of Spain.", False),
]


def distracted(prompt: str) -> dict:
    """A reader that answers right only when no other capital is in its context."""
    others = ("Berlin is the capital", "Rome is the capital", "Madrid is the capital")
    return {"answer": "Berlin" if any(o in prompt for o in others) else "Paris"}


def capitals_file(path, n: int) -> str:
    rows = [
        {
            "id": f"q{i}",
            "question": f"Question {i}: what is the capital of France?",
            "answers": ["Paris"],
            "paragraphs": [{"title": t, "text": x, "is_supporting": s} for t, x, s in PASSAGES],
        }
        for i in range(n)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


# a scripted embedded engine for tuned models (tests/core/models/test_finetune.py and
# tests/optimize/test_finetune.py)
from netcast.testing import SchemaEngine  # noqa: E402


class GGUFEngine(SchemaEngine):
    """A scripted engine that says which model files it runs (what a tuned model's copy
    rewires, ``netcast.models.finetune.attach``): with an adapter it answers ``tuned``, else
    ``base_answer(prompt)``; a subclass may script ``reply`` itself."""

    def __init__(self, model_path, lora_path=None):
        super().__init__(self.reply)
        self.model_path, self.lora_path = model_path, lora_path

    def reply(self, prompt: str) -> dict:
        return {"answer": "tuned" if self.lora_path else self.base_answer(prompt)}

    def base_answer(self, prompt: str) -> str:
        return "base"

    def dump_state(self):
        return {"model_path": self.model_path, "lora_path": self.lora_path}

    @classmethod
    def load_state(cls, state):
        return cls(**state)
