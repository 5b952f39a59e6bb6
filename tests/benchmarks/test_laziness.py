"""benchmarks/laziness.py: the agent's next action asked once per question and first-context
length (Fishing for Answers, Appendix B), with scripted fake models."""


def test_laziness_context_holds_one_gold_chunk_and_the_asked_length(fake_models, script, capsys):
    import random

    fake_models.replies["m"] = {"action": "search"}
    module = script("laziness")
    module.main(["--questions", "2", "--model", "m", "--lengths", "200"])
    out = capsys.readouterr().out
    assert "model under test: m" in out
    row = next(line for line in out.splitlines() if line.startswith("| 200 "))
    assert row == "| 200 | 2 | 1 | 0 | 0 |"
    from _common import dev_questions

    data, retriever = dev_questions("hotpotqa-sample", 1, fake_models.make("m"))
    example = data.examples[0]
    working = module.first_context(example, retriever.corpus, 300, random.Random(0))
    gold = [c for c in working.by_label.values() if c.doc_id in set(example.gold_ids)]
    assert len(gold) == 1 and working.tokens() >= 300
