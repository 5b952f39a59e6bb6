"""DSPy's JSONAdapter (what netcast runs a model with when it decodes under a JSON schema: the
embedded models, providers with structured outputs) that can also format fine-tuning data.

DSPy 3.4's ``JSONAdapter.format_finetune_data`` raises NotImplementedError. Here a training
example is the chat the adapter sends at inference (``format``: the same system and user
messages, demonstrations included) followed by the reply as the adapter asks for it (its JSON
object of the output fields), so a model is trained on the very prompt it will be shown."""

from __future__ import annotations

from typing import Any

import dspy


class JSONAdapter(dspy.JSONAdapter):
    def format_finetune_data(
        self,
        signature: type[dspy.Signature],
        demos: list[dict[str, Any]],
        inputs: dict[str, Any],
        outputs: dict[str, Any],
    ) -> dict[str, list[Any]]:
        messages = self.format(signature=signature, demos=demos, inputs=inputs)
        reply = self.format_assistant_message_content(signature=signature, outputs=outputs)
        return {"messages": [*messages, {"role": "assistant", "content": reply}]}
