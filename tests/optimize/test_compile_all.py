"""Compiling works for every registered strategy: bootstrapped demonstrations from successful
traces of the multi-step program for each step that ran, labeled ones where traces are too few,
and a report of how many each predictor got and from where."""

import re

import pytest

from helpers import WordCounter
from netcast.artifacts import load_program_state
from netcast.corpus import Corpus, Document
from netcast.optimize.compile import compile_program, demo_report
from netcast.programs import PROGRAMS
from netcast.retrievers.bm25 import BM25Retriever

DOCS = [
    Document("paris", "Paris", "Paris is the capital of France."),
    Document("seine", "Seine", "The Seine flows through Paris."),
    Document("berlin", "Berlin", "Berlin is the capital of Germany."),
]
FIELD = re.compile(r"\d+\. `(\w+)` \(([^)]*)\)")
# a list type under another name (``bounded_list``) shows its JSON schema in the prompt
ARRAY = re.compile(
    r"\{(\w+)\}\s+# note: the value you produce must adhere to the JSON schema: "
    r'\{"type": "array"'
)


def any_signature(prompt: str) -> dict:
    """A scripted model for any Signature: reads the output fields and their types from the
    prompt (DSPy's ChatAdapter lists them) and gives each a plausible value."""
    outputs = prompt.split("Your output fields are:", 1)[1].split("All interactions", 1)[0]
    arrays = set(ARRAY.findall(prompt))
    reply = {}
    for name, kind in FIELD.findall(outputs):
        if "Literal" in kind:
            reply[name] = "answer" if "'answer'" in kind else re.findall(r"'(\w+)'", kind)[0]
        elif kind.startswith("list") or name in arrays:
            reply[name] = "[]" if name in ("delete_ids", "still_required") else '["Paris (P1)"]'
        elif kind == "bool":
            reply[name] = "True"
        else:
            reply[name] = "Paris (P1)" if name in ("known_facts",) else "Paris"
    return reply


def examples():
    import dspy

    questions = ["What is the capital of France?", "Which city does the Seine flow through?"]
    return [
        dspy.Example(
            id=f"q{i}", question=q, answers=["Paris"], answer="Paris", gold_ids=[]
        ).with_inputs("question")
        for i, q in enumerate(questions)
    ]


KNOBS = {"iterkey": {"validation": "text"}}  # forced decoding needs next-token logprobs


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_strategy_compiles_with_demos_for_the_steps_that_ran(scripted_lm, tmp_path, name):
    scripted_lm(any_signature)
    retriever = BM25Retriever(Corpus.from_documents(DOCS, WordCounter()))
    program = PROGRAMS[name](retriever, **KNOBS.get(name, {}))
    ran = set(program(question="What is the capital of France?").trace["steps"])
    compiled = compile_program(
        program,
        examples(),
        optimizer="bootstrap",
        metric="f1",
        settings={"max_bootstrapped_demos": 1, "max_labeled_demos": 1},
    )
    report = demo_report(compiled)
    assert set(report) == {n.removesuffix(".predict") for n, _ in program.named_predictors()}
    for step in ran:
        assert report[step]["bootstrapped"] >= 1, (step, report)
    assert compiled(question="Capital of France?").answer == "Paris"
    # the compiled state loads back into a fresh program: DSPy rebuilds each signature from its
    # field types (a type DSPy refuses fails here), and every demonstration comes back
    compiled.save(str(tmp_path / "program.json"))
    fresh = PROGRAMS[name](retriever, **KNOBS.get(name, {}))
    load_program_state(fresh, tmp_path, allow_pickle=False)
    assert demo_report(fresh) == report
    assert fresh(question="Capital of France?").answer == "Paris"
