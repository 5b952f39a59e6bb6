"""Context-preserving crops: a crop is accepted only if it consists of whole sentences of the
original chunk (whitespace aside); then it is rebuilt from those sentences in their original
order, so nothing the model wrote enters the context."""

from __future__ import annotations

import re

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def _norm(text: str) -> str:
    return " ".join(text.split())


def verified_crop(original: str, cropped: str) -> str | None:
    """The crop as sentences of ``original`` (in original order), or ``None`` if any sentence of
    the crop is not a sentence of the original, or the crop is empty."""
    source = sentences(original)
    normalized = [_norm(s) for s in source]
    picked: set[int] = set()
    for sentence in sentences(cropped):
        try:
            picked.add(normalized.index(_norm(sentence)))
        except ValueError:
            return None
    if not picked:
        return None
    return " ".join(source[i] for i in sorted(picked))
