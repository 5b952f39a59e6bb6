"""DSPy's chat format with one more refusal: a reply in which an output field's header
(``[[ ## name ## ]]``) starts a line more than once is unreadable.

DSPy's ChatAdapter keeps the first section of each field. A model that copies a passage holding
the format's own headers into its first field (its reasoning) would otherwise have the copied
``[[ ## action ## ]]`` / ``[[ ## answer ## ]]`` read as its action and answer, its real ones
ignored. Such a reply is ambiguous, so it is refused as a parse failure (DSPy then tries its JSON
fallback; a program treats a reply that still fails as it treats any unreadable one). Passages
shown to models also have such headers neutralized (``netcast.corpus.format_passage``)."""

from __future__ import annotations

from typing import Any

import dspy
from dspy.adapters.chat_adapter import field_header_pattern
from dspy.utils.exceptions import AdapterParseError


class ChatAdapter(dspy.ChatAdapter):
    def parse(self, signature: type[dspy.Signature], completion: str) -> dict[str, Any]:
        headers = [
            match.group(1)
            for line in completion.splitlines()
            if (match := field_header_pattern.match(line.strip()))
        ]
        repeated = sorted(
            {h for h in headers if h in signature.output_fields and headers.count(h) > 1}
        )
        if repeated:
            raise AdapterParseError(
                adapter_name="ChatAdapter",
                signature=signature,
                lm_response=completion,
                message=f"the reply holds the header of {', '.join(repeated)} more than once",
            )
        return super().parse(signature, completion)
