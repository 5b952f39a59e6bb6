"""Constrained decoding: xgrammar's token mask over a tiny fake vocabulary, the engine's
``response_format`` declarations to DSPy, and (slow) the embedded model under DSPy's JSONAdapter."""

from __future__ import annotations

import json
from typing import Literal

import dspy
import numpy as np
import pytest

from netcast.models.grammar import Grammars, schema_of
from netcast.models.llama import LlamaCppEngine

# token 0 is the end-of-generation token (a control token: no bytes)
PIECES = [b"", b"{", b"}", b'"', b"label", b":", b" ", b"\n", b"yes", b"no", b"maybe", b"y", b"es"]
PIECES += [b"items", b"ok", b"[", b"]", b",", b"true", b"false", b"a", b"b", b"True"]
TOKEN = {piece.decode(): i for i, piece in enumerate(PIECES) if piece}
EOG = 0
LABEL = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["label"],
    "additionalProperties": False,
}
PROMPT = [101, 102]  # the prompt's token ids: what the processor sees on its first call


@pytest.fixture(scope="module")
def grammars() -> Grammars:
    return Grammars(PIECES, [EOG])


def allowed_after(grammars: Grammars, schema: dict, reply: list[str]) -> set[bytes]:
    """The pieces the mask leaves open after ``reply``, fed as llama-cpp-python does: the
    prompt on the first call, then the prompt plus each sampled token."""
    processor = grammars.processor(schema)
    ids = list(PROMPT)
    for piece in [*reply, None]:
        scores = np.zeros(len(PIECES), dtype=np.float32)
        processor(np.array(ids), scores)
        if piece is not None:
            assert np.isfinite(scores[TOKEN[piece]]), f"{piece!r} masked after {ids}"
            ids.append(TOKEN[piece])
    assert not processor.failed
    return {PIECES[i] for i in np.flatnonzero(np.isfinite(scores))}


def test_a_literal_field_admits_only_its_values(grammars):
    opened = ["{", '"', "label", '"', ":", " ", '"']
    allowed = allowed_after(grammars, LABEL, opened)
    assert {b"yes", b"no", b"y"} <= allowed  # "y" starts "yes"
    assert not allowed & {b"maybe", b"a", b'"', b"True"}
    assert allowed_after(grammars, LABEL, [*opened, "y"]) == {b"es"}


def test_the_reply_starts_with_the_object_and_ends_at_the_stop_token(grammars):
    assert allowed_after(grammars, LABEL, []) == {b"{"}
    whole = ["{", "\n", '"', "label", '"', ":", " ", '"', "no", '"', "\n", "}"]
    assert allowed_after(grammars, LABEL, whole) == {b""}  # only the end-of-generation token


def test_list_and_bool_fields_follow_the_schema(grammars):
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "string"}}},
        "required": ["items"],
        "additionalProperties": False,
    }
    in_list = allowed_after(grammars, schema, ["{", '"', "items", '"', ":", " ", "["])
    assert b'"' in in_list and b"]" in in_list and b"a" not in in_list
    boolean = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    value = allowed_after(grammars, boolean, ["{", '"', "ok", '"', ":", " "])
    assert {b"true", b"false"} <= value and b"True" not in value and b'"' not in value


def test_any_json_object_for_json_object_format(grammars):
    schema = schema_of({"type": "json_object"})
    assert schema == {}
    assert allowed_after(grammars, schema, []) == {b"{"}
    assert allowed_after(grammars, schema, ["{", '"', "a", '"', ":", " "]) >= {b"true", b"[", b'"'}


def test_compiled_grammars_are_cached_by_schema(grammars):
    assert grammars.compile(LABEL) is grammars.compile(json.loads(json.dumps(LABEL)))
    assert grammars.compile(LABEL) is not grammars.compile({**LABEL, "title": "Other"})


def test_schema_of_reads_the_canonical_response_formats():
    assert schema_of(None) is None
    assert schema_of({"type": "json_schema", "schema": LABEL, "name": "X", "strict": True}) == LABEL
    with pytest.raises(ValueError):
        schema_of({"type": "text"})


def test_the_engine_asks_dspy_for_a_schema_only_when_constrained(tmp_path):
    model = str(tmp_path / "never-loaded.gguf")
    constrained = dspy.LM("netcast/x", engine=LlamaCppEngine(model))
    free = dspy.LM("netcast/x", engine=LlamaCppEngine(model, constrained=False))
    assert constrained.supports_response_schema and not free.supports_response_schema
    assert "response_format" in constrained.supported_params
    assert "response_format" not in free.supported_params
    assert LlamaCppEngine.load_state(free.engine.dump_state()).constrained is False


class Verdict(dspy.Signature):
    """Is the claim supported by the passage?"""

    passage: str = dspy.InputField()
    claim: str = dspy.InputField()
    label: Literal["supported", "refuted", "not enough info"] = dspy.OutputField()


class Entities(dspy.Signature):
    """List the people named in the text."""

    text: str = dspy.InputField()
    people: list[str] = dspy.OutputField()


class IsQuestion(dspy.Signature):
    """Is the text a question?"""

    text: str = dspy.InputField()
    is_question: bool = dspy.OutputField()


class ReviewFacts(dspy.Signature):
    """Classify the sentiment of a product review and list the product aspects it mentions."""

    review: str = dspy.InputField()
    sentiment: Literal["positive", "negative", "mixed"] = dspy.OutputField()
    aspects: list[str] = dspy.OutputField()
    recommends: bool = dspy.OutputField()


@pytest.mark.slow
def test_the_embedded_model_replies_parse_under_the_json_adapter():
    from netcast.models import make_lm

    lm = make_lm("embedded", cache=False, max_tokens=128)
    calls = [
        (Verdict, {"passage": "Paris is the capital of France.", "claim": "Paris is in Spain."}),
        (Entities, {"text": "Marie Curie met Albert Einstein in 1911 in Brussels."}),
        (IsQuestion, {"text": "Where did you park the car"}),
        (ReviewFacts, {"review": "The battery lasts forever but the screen scratches easily."}),
    ]
    try:
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            for signature, inputs in calls:
                prediction = dspy.Predict(signature)(**inputs)
                entry = lm.history[-1]
                assert "response_format" in entry["kwargs"]  # decoded under the schema
                reply = json.loads(entry["outputs"][0])  # strict JSON, no repair needed
                assert list(reply) == list(signature.output_fields)
                for name, field in signature.output_fields.items():
                    value = getattr(prediction, name)
                    if field.annotation is bool:
                        assert isinstance(value, bool)
                    elif field.annotation == list[str]:
                        assert all(isinstance(item, str) for item in value)
                    else:
                        assert value in field.annotation.__args__
    finally:
        lm.engine.close()
