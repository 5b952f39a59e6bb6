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


def tiny_base(model_path, dtype=None):
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


# a scripted embedded engine for tuned models (tests/core/models/test_lora_provider.py and
# tests/optimize/test_finetune.py)
from netcast.testing import SchemaEngine  # noqa: E402


class GGUFEngine(SchemaEngine):
    """A scripted engine that says which model files it runs (what a tuned model's copy
    rewires, ``netcast.models.lora_provider.attach``): with an adapter it answers ``tuned``, else
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


def tiny_gguf_base(path, seed: int = 0, hidden: int = 64, ffn: int = 128, vocab: int = 64):
    """A 2-block random Qwen2 written as a GGUF file (Q8_0 matrices, F32 norms): enough header
    for llama.cpp's quantizer, no vocabulary. Returns ``path``."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_context_length(128)
    writer.add_embedding_length(hidden)
    writer.add_block_count(2)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(10000.0)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    writer.add_string("netcast.test", "tiny")

    def matrix(name, rows, cols):
        data = rng.standard_normal((rows, cols)).astype(np.float32) * 0.1
        q8 = gguf.GGMLQuantizationType.Q8_0
        writer.add_tensor(name, gguf.quants.quantize(data, q8), raw_dtype=q8)

    kv = hidden // 4 * 2
    matrix("token_embd.weight", vocab, hidden)
    for i in range(2):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
        matrix(f"blk.{i}.attn_q.weight", hidden, hidden)
        matrix(f"blk.{i}.attn_k.weight", kv, hidden)
        matrix(f"blk.{i}.attn_v.weight", kv, hidden)
        matrix(f"blk.{i}.attn_output.weight", hidden, hidden)
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        matrix(f"blk.{i}.ffn_gate.weight", ffn, hidden)
        matrix(f"blk.{i}.ffn_up.weight", ffn, hidden)
        matrix(f"blk.{i}.ffn_down.weight", hidden, ffn)
    writer.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
    matrix("output.weight", vocab, hidden)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def tiny_gguf_adapter(path, targets: dict[str, tuple[int, int]], rank: int = 4, alpha=8.0):
    """A GGUF LoRA over ``targets`` ({base tensor name: (rows, cols)} in numpy order) with
    random A and B; returns {name: (A, B)} as float32 arrays (A (rank, cols), B (rows, rank))."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(1)
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_type(gguf.GGUFType.ADAPTER)
    writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
    writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
    pairs = {}
    for name, (rows, cols) in sorted(targets.items()):
        a = rng.standard_normal((rank, cols)).astype(np.float16)
        b = rng.standard_normal((rows, rank)).astype(np.float16)
        writer.add_tensor(f"{name}.lora_a", a)
        writer.add_tensor(f"{name}.lora_b", b)
        pairs[name] = (a.astype(np.float32), b.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return pairs
