"""Models: the LM factory, the embedded models (files shipped on PyPI, run in-process by
llama.cpp), token counters, and usage counting for any DSPy LM."""

from netcast.models.embedded import EMBEDDED
from netcast.models.factory import (
    EmbeddedLM,
    configure,
    context_window,
    decoding_info,
    default_adapter,
    embedded_name,
    is_embedded,
    make_lm,
    model_name,
    token_counter,
    use_netcast_cache,
)

__all__ = [
    "EMBEDDED",
    "EmbeddedLM",
    "configure",
    "context_window",
    "decoding_info",
    "default_adapter",
    "embedded_name",
    "is_embedded",
    "make_lm",
    "model_name",
    "token_counter",
    "use_netcast_cache",
]
