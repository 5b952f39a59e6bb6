from netcast.models import embedded
from netcast.models.tokens import (
    ApproxTokenCounter,
    LlamaTokenCounter,
    approx_counter,
    counter_named,
    embedded_counter,
)


def test_approx_counter_uses_bundled_tiktoken(approx_counter):
    assert approx_counter.name == "tiktoken:cl100k_base"
    assert approx_counter.count("hello world") == 2
    assert approx_counter.count("") == 0


def test_approx_counter_fallback_counts_words_and_punctuation(monkeypatch):
    counter = ApproxTokenCounter()
    monkeypatch.setattr(counter, "_encoding", None)
    assert counter.count("Hello, world again") == round(4 * 1.3)


def test_llama_counter_counts_with_the_embedded_tokenizer():
    counter = LlamaTokenCounter(str(embedded.model_path()))
    assert counter.count("hello world") == 2
    long = "The Eiffel Tower is a wrought-iron lattice tower in Paris. " * 10
    assert 100 < counter.count(long) < 200


def test_counters_are_found_by_the_name_a_corpus_recorded(scripted_lm):
    scripted_lm(lambda p: {"answer": "x"})  # a non-embedded LM is DSPy's: it does not matter
    found = counter_named("llama:" + embedded.spec().file_name)
    assert found.name == "llama:" + embedded.spec().file_name
    assert found is embedded_counter()  # loaded once per process
    assert counter_named("tiktoken:cl100k_base").name.startswith("tiktoken")
    assert counter_named("").name.startswith("tiktoken")
    assert counter_named("") is approx_counter()
