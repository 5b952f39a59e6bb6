"""Forced decoding of True/False: the probability that a model's next token is "True" rather
than "False", given a DSPy-formatted prompt and the start of its reply.

An engine that offers ``next_token_logprobs(messages, prefix, candidates)`` (the embedded
llama.cpp engine, or a test's fake) is asked directly; other LMs go through litellm with
``logprobs=True`` where the provider returns them.

Each verdict is matched in its spellings ("True", "true", " True", " true": tokenizers differ in
whether a leading space or the case is part of the first token), and the probabilities of their
distinct first tokens are added. When neither verdict is among the candidates the model could
produce (no logprobs for either), the result is ``None``: nothing validates by default."""

from __future__ import annotations

import math
from typing import Any

from netcast import trace
from netcast.errors import ModelCallError

VERDICTS = {
    "True": ("True", "true", " True", " true"),
    "False": ("False", "false", " False", " false"),
}


def p_true(lm: Any, messages: list[dict[str, str]], prefix: str) -> float | None:
    """P("True") / (P("True") + P("False")) for the next token, or None if neither appears."""
    engine = getattr(lm, "engine", None)
    if hasattr(engine, "next_token_logprobs"):
        spellings = tuple(s for group in VERDICTS.values() for s in group)
        # the engine returns one spelling per distinct first token (the same event once)
        logprobs, n_prompt = engine.next_token_logprobs(messages, prefix, spellings)
        mass = {
            verdict: math.fsum(math.exp(logprobs[s]) for s in group if s in logprobs)
            for verdict, group in VERDICTS.items()
        }
    else:
        mass, n_prompt = _litellm_mass(lm, messages, prefix)
    active = trace.current()
    if active is not None:
        active.add_lm_call(n_prompt, 1, cached=False)
    total = mass["True"] + mass["False"]
    return mass["True"] / total if total > 0 else None


def _litellm_mass(lm: Any, messages, prefix) -> tuple[dict[str, float], int]:
    """The verdicts' probability mass read from the top token logprobs of an API reply.

    The reply is prefilled: ``prefix`` goes as a final assistant message, the start of the
    model's own reply, so that the one token generated is the verdict. A server given by
    ``api_base`` (or ``OPENAI_API_BASE``) is also sent vLLM's ``continue_final_message`` and
    ``add_generation_prompt=False`` (llama.cpp's server continues a final assistant message
    without them; servers that do not know them ignore them). A server whose chat template
    closes that message and opens a new reply (llama-cpp-python's server with a GGUF's own
    template, OpenAI's hosted models) does not prefill: its first token then starts a new reply
    instead of being the verdict. No verdict among the top tokens gives zero mass: nothing
    validates."""
    import os

    import litellm

    def get(item: Any, key: str) -> Any:  # litellm returns objects, a raw reply dicts
        return item[key] if isinstance(item, dict) else getattr(item, key)

    asked = [*messages, {"role": "assistant", "content": prefix}]
    kwargs = {
        k: v
        for k, v in getattr(lm, "kwargs", {}).items()
        if k in ("api_base", "api_key", "api_version")
    }
    if (
        kwargs.get("api_base")
        or os.environ.get("OPENAI_API_BASE")
        or os.environ.get("OPENAI_BASE_URL")
    ):
        kwargs["extra_body"] = {"continue_final_message": True, "add_generation_prompt": False}
    try:
        response = litellm.completion(
            model=lm.model,
            messages=asked,
            logprobs=True,
            top_logprobs=20,
            max_tokens=1,
            temperature=0,
            **kwargs,
        )
        top = get(get(get(response.choices[0], "logprobs"), "content")[0], "top_logprobs")
    except Exception as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ModelCallError(
            f"{lm.model}: no token logprobs for forced decoding ({first})"
        ) from err
    mass = {"True": 0.0, "False": 0.0}
    for entry in top or []:
        token = str(get(entry, "token")).strip().lower()
        for verdict in mass:
            if token == verdict.lower():
                mass[verdict] += math.exp(float(get(entry, "logprob")))
    return mass, int(getattr(response.usage, "prompt_tokens", 0) or 0)
