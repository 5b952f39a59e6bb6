"""Forced decoding of True/False: the probability that a model's next token is "True" rather
than "False", given a DSPy-formatted prompt and the start of its reply.

An engine that offers ``next_token_logprobs(messages, prefix, candidates)`` (the embedded
llama.cpp engine, or a test's fake) is asked directly; other LMs go through litellm with
``logprobs=True`` where the provider returns them."""

from __future__ import annotations

import math
from typing import Any

from netcast import trace
from netcast.errors import ModelCallError


def p_true(lm: Any, messages: list[dict[str, str]], prefix: str) -> float:
    """P("True") / (P("True") + P("False")) for the next token."""
    engine = getattr(lm, "engine", None)
    if hasattr(engine, "next_token_logprobs"):
        logprobs, n_prompt = engine.next_token_logprobs(messages, prefix, ("True", "False"))
    else:
        logprobs, n_prompt = _litellm_logprobs(lm, messages, prefix)
    active = trace.current()
    if active is not None:
        active.add_lm_call(n_prompt, 1, cached=False)
    t, f = math.exp(logprobs["True"]), math.exp(logprobs["False"])
    return t / (t + f) if t + f > 0 else 0.5


def _litellm_logprobs(lm: Any, messages, prefix) -> tuple[dict[str, float], int]:
    import litellm

    asked = [
        *messages[:-1],
        {
            **messages[-1],
            "content": messages[-1]["content"] + f"\n\nReply with the next token only. {prefix}",
        },
    ]
    kwargs = {
        k: v
        for k, v in getattr(lm, "kwargs", {}).items()
        if k in ("api_base", "api_key", "api_version")
    }
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
        top = response.choices[0].logprobs["content"][0]["top_logprobs"]
    except Exception as err:
        raise ModelCallError(f"{lm.model}: no token logprobs for forced decoding ({err})") from err
    found = {"True": -math.inf, "False": -math.inf}
    for entry in top:
        token = entry["token"].strip()
        if token in found:
            found[token] = max(found[token], entry["logprob"])
    return found, int(getattr(response.usage, "prompt_tokens", 0) or 0)
