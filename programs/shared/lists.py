"""Reading the lists models write (keywords, memory notes, open gaps): one parser for all.

Accepts a list, a JSON list (fenced or inside other text), or separated text (bullets and
numbering stripped). Items are whitespace-collapsed and unquoted; empty items and placeholders
meaning "nothing" ('none', 'n/a', '[]', 'nothing new helps') are dropped; repeats (ignoring case)
are dropped, keeping the first.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import core_schema

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s*")
_NOTHING = re.compile(r"^\s*(\[\s*\]|none|nothing( new)?( helps)?|n/?a)\s*\.?\s*$", re.I)
_QUOTES = "\"'`“”‘’"


def parse_list(raw: object, separators: str = "\n") -> list[str]:
    """Items of ``raw``; text that is not a JSON list is split at any of ``separators``."""
    if isinstance(raw, (list, tuple)):
        items = [str(x) for x in raw]
    else:
        text = str(raw or "").strip()
        fenced = _FENCE.search(text)
        if fenced:
            text = fenced.group(1).strip()
        items = _json_items(text)
        if items is None:
            pattern = "[" + re.escape(separators) + "]"
            items = [_BULLET.sub("", p) for p in re.split(pattern, text.strip("[]"))]
    seen: dict[str, str] = {}
    for item in items:
        cleaned = " ".join(item.split()).strip(_QUOTES).strip()
        if cleaned and not _NOTHING.match(cleaned) and cleaned.lower() not in seen:
            seen[cleaned.lower()] = cleaned
    return list(seen.values())


def _json_items(text: str) -> list[str] | None:
    start, end = text.find("["), text.rfind("]")
    if start == -1 or end <= start:
        return None
    try:
        value = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    if not isinstance(value, list):
        return None
    return [str(v) for v in value if isinstance(v, (str, int, float))]


def bounded_list(name: str, items: int) -> type:
    """A ``list[str]`` output type whose JSON schema allows at most ``items`` items. A
    constrained engine decodes under that schema (xgrammar enforces ``maxItems``), so a small
    model that would add items until its token limit cuts the reply (invalid JSON: a parse
    failure) closes the list instead. Only the schema carries the bound: an unconstrained
    model's longer list still parses (as a plain ``list``). Items are not bounded in length:
    xgrammar's ``maxLength`` strings admit no escapes, so an item could not hold a quotation
    mark. A class named ``name`` (the prompt shows the name): DSPy rebuilds signatures from
    their field types when it loads a saved program or sets instructions, and accepts only
    types there (a ``TypeAliasType`` made those fail)."""
    schema = {"type": "array", "items": {"type": "string"}, "maxItems": items}

    def core(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        return handler.generate_schema(list[str])

    def json_schema(cls, core: core_schema.CoreSchema, handler: GetJsonSchemaHandler) -> dict:
        return dict(schema)

    hooks = {
        "__get_pydantic_core_schema__": classmethod(core),
        "__get_pydantic_json_schema__": classmethod(json_schema),
        "__module__": __name__,
    }
    return type(name, (list,), hooks)
