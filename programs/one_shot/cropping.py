"""Context-preserving crops (One-SHOT's LLM chunk cropping). A crop is accepted only if each of
its sentences is a sentence of the original chunk (``exact``: whitespace and case aside, the
paper's rule; ``fuzzy``: at least ``threshold`` similar, for small models that copy almost
verbatim); the accepted crop is rebuilt from the original's own sentences in their original
order, so nothing the model wrote enters the context. A reply meaning "no sentence helps"
drops the chunk (the paper's Table 2 counts chunks removed as irrelevant)."""

from __future__ import annotations

import re

from netcast.programs.shared.spans import Mode, same_text

# a sentence ends at . ! ? (several allowed) and keeps the closing quotes or brackets after it
_SENTENCE = re.compile(r"\S.*?(?:[.!?]+[\"'”’)\]]*(?=\s|$)|$)", re.S)
_NOTHING = re.compile(r"^\s*(none|nothing|no sentence( helps)?|n/?a|-)\s*\.?\s*$", re.I)
DROP = ""  # what ``verified_crop`` returns for "no sentence helps"


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def verified_crop(
    original: str, cropped: str, mode: Mode = "exact", threshold: float = 0.9
) -> str | None:
    """The crop as sentences of ``original`` (in original order); ``DROP`` ("") if the reply
    says no sentence helps; ``None`` (rejected) if a sentence of the crop is not a sentence of
    the original, or the crop is empty."""
    if _NOTHING.match(cropped or ""):
        return DROP
    source = sentences(original)
    picked: set[int] = set()
    for sentence in sentences(cropped):
        match = next((i for i, s in enumerate(source) if same_text(s, sentence, "exact")), None)
        if match is None and mode == "fuzzy":
            match = next(
                (i for i, s in enumerate(source) if same_text(s, sentence, mode, threshold)), None
            )
        if match is None:
            return None
        picked.add(match)
    if not picked:
        return None
    return " ".join(source[i] for i in sorted(picked))
