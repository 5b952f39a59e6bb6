import json

from helpers import WordCounter
from netcast.artifacts import load_program_state
from netcast.corpus import Corpus, Document
from netcast.programs import Iterative
from netcast.retrievers.bm25 import BM25Retriever


def retriever():
    docs = [Document("paris", "Paris", "Paris is the capital of France.")]
    return BM25Retriever(Corpus.from_documents(docs, WordCounter()))


def test_a_state_saved_with_another_field_order_restores_each_fields_own_description(tmp_path):
    program = Iterative(retriever())
    state = program.dump_state()
    fields = state["answer"]["signature"]["fields"]
    assert [f["prefix"] for f in fields] == ["Context:", "Notes:", "Question:", "Answer:"]
    # as saved before the question moved last (artifacts compiled before df73184)
    state["answer"]["signature"]["fields"] = [fields[2], fields[0], fields[1], fields[3]]
    for f in state["answer"]["signature"]["fields"]:
        f["description"] = f"saved {f['prefix']}"
    (tmp_path / "program.json").write_text(json.dumps(state))

    loaded = Iterative(retriever())
    load_program_state(loaded, tmp_path, allow_pickle=False)
    descs = {n: f.json_schema_extra["desc"] for n, f in loaded.answer.signature.fields.items()}
    assert descs == {
        "context": "saved Context:",
        "notes": "saved Notes:",
        "question": "saved Question:",
        "answer": "saved Answer:",
    }


def test_fields_whose_prefixes_changed_are_restored_by_position_as_dspy_does(tmp_path):
    program = Iterative(retriever())
    state = program.dump_state()
    for i, f in enumerate(state["answer"]["signature"]["fields"]):
        f["prefix"], f["description"] = f"Renamed {i}:", f"d{i}"
    (tmp_path / "program.json").write_text(json.dumps(state))
    loaded = Iterative(retriever())
    load_program_state(loaded, tmp_path, allow_pickle=False)
    fields = loaded.answer.signature.fields
    assert [f.json_schema_extra["desc"] for f in fields.values()] == ["d0", "d1", "d2", "d3"]
