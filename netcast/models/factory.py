"""Making LMs: ``make_lm(model)`` -> a DSPy LM for a litellm model string or an embedded model
(``"embedded"``, the default; every embedded model name is listed in ``embedded.MODELS``), and
what netcast needs to know about an LM: its context window and the token counter that matches
it. Nothing here reads DSPy's global LM: every function takes the LM it is about."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import dspy

from netcast import settings
from netcast.errors import InputError
from netcast.models import embedded
from netcast.models.adapter import ChatAdapter
from netcast.models.embedded import DEFAULT_N_CTX, EMBEDDED
from netcast.models.json_adapter import JSONAdapter
from netcast.models.replicas import ReplicaEngine
from netcast.models.tokens import TokenCounter, approx_counter, embedded_counter

# seconds a model called over HTTP may take to reply before the call fails: a local CPU server
# answers a long RAG prompt in about a minute, more with several questions queued on it
DEFAULT_TIMEOUT = 300.0
# a tuned embedded model applies its LoRA adapter at run time unless merge_adapter=True (a cached
# merged file, netcast.models.merge): benchmarks/merged_model.py found the merged file faster
# (prompts 0.93x base against 0.70x) but its top-1 tokens agreed with the runtime adapter's at
# only 192 of 199 answer positions (requantization), a smoke run with a random adapter
MERGE_ADAPTER = False
_cache_state: dict[str, str | None] = {"dir": None}


class EmbeddedLM(dspy.LM):
    """``dspy.LM`` over an embedded model's llama.cpp engine (DSPy's custom-engine path; the
    engine is DSPy's public ``lm.engine``), knowing which embedded model it runs (for its
    tokenizer)."""

    def __init__(self, name: str, engine: Any, **kwargs: Any):
        from netcast.models.lora_provider import LlamaCppProvider

        spec = embedded.spec(name)
        kwargs.setdefault("provider", LlamaCppProvider())  # lm.finetune trains a LoRA on CPU
        super().__init__(f"netcast/{spec.model_name}", engine=engine, **kwargs)
        self.embedded_name = spec.name

    def copy(self, **kwargs: Any) -> dspy.LM:
        """DSPy's copy, which keeps the engine; a copy for another model id (a tuned model's,
        ``netcast.models.lora``: what ``lm.finetune`` makes) gets an engine running that model."""
        copied = super().copy(**kwargs)
        if copied.model != self.model and "engine" not in kwargs:
            from netcast.models.lora_provider import attach

            copied = attach(copied)
        return copied


def model_name(model: str | None) -> str:
    """The one spelling: ``None`` (no model given) is ``"embedded"``."""
    return model or EMBEDDED


def is_embedded(model: str | None) -> bool:
    """Whether ``model`` names an embedded model (run in this process), not one on a server."""
    return model_name(model) in embedded.MODELS


def use_netcast_cache() -> None:
    """Point DSPy's disk cache at netcast's directory (once per process and directory)."""
    directory = str(settings.cache_dir())
    if _cache_state["dir"] != directory:
        dspy.configure_cache(enable_disk_cache=True, disk_cache_dir=directory)
        _cache_state["dir"] = directory


def make_lm(model: str | None = EMBEDDED, **lm_kwargs: Any) -> dspy.LM:
    """A DSPy LM: an embedded model by name (``"embedded"``, ``"embedded-1.5b"``), else a
    litellm string (``openai/gpt-4o-mini``, ``ollama_chat/llama3.1``, ...); ``api_base`` a list
    of several servers spreads its calls over them (``netcast.models.replicas``). Temperature 0
    by default. Uses netcast's DSPy cache directory. Embedded models decode under the JSON schema
    of each step's outputs (``constrained=True``, see ``default_adapter``); ``constrained=False``
    decodes freely, for comparison. These settings (``EMBEDDED_SETTINGS``: ``n_ctx``,
    ``prefix_cache``, ``constrained``, ``merge_adapter``) given for a model on a server are one
    ``InputError``: it has its server's window, cache and decoding.

    A model called over HTTP waits at most ``timeout`` seconds (default ``DEFAULT_TIMEOUT``) for
    each reply before the call fails (and is retried ``num_retries`` times). A name no provider
    answers to, an endpoint that is not an http(s) URL, negative retries or a timeout that is
    not a positive number are one ``InputError`` here, before any call."""
    use_netcast_cache()
    name = model_name(model)
    lm_kwargs.setdefault("temperature", 0.0)
    _check_settings(lm_kwargs)
    if is_embedded(name):
        from netcast.models.llama import LlamaCppEngine

        if lm_kwargs.get("api_base"):
            raise InputError(
                f"--api-base: {name} runs in this process, not on a server; name the served "
                "model with --model (e.g. openai/NAME for an OpenAI-compatible server)"
            )

        lm_kwargs.pop("timeout", None)  # in-process: nothing to wait for
        n_ctx = int(lm_kwargs.pop("n_ctx", os.environ.get("NETCAST_N_CTX", DEFAULT_N_CTX)))
        # the engine's own defaults (netcast.models.llama) where a setting is not given
        given = {
            k: lm_kwargs.pop(k)
            for k in ("max_tokens", "prefix_cache", "constrained")
            if k in lm_kwargs
        }
        engine = LlamaCppEngine(
            str(embedded.model_path(name)),
            n_ctx=n_ctx,
            merge_lora=lm_kwargs.pop("merge_adapter", MERGE_ADAPTER),
            **given,
        )
        lm_kwargs.setdefault("num_retries", 0)
        return EmbeddedLM(name, engine, max_tokens=engine.max_tokens, **lm_kwargs)
    _check_served_settings(name, lm_kwargs)
    lm_kwargs.pop("merge_adapter", None)  # False: nothing to merge
    lm_kwargs.pop("constrained", None)  # True: a provider's structured output, default_adapter
    lm_kwargs.setdefault("max_tokens", 1024)
    lm_kwargs.setdefault("num_retries", 3)
    lm_kwargs.setdefault("timeout", DEFAULT_TIMEOUT)
    check_model_name(name, lm_kwargs.get("api_base"))
    if isinstance(lm_kwargs.get("api_base"), (list, tuple)):
        bases = list(dict.fromkeys(lm_kwargs.pop("api_base")))  # a repeated server is one
        if len(bases) > 1:  # replicas of one model (netcast.models.replicas)
            client = {k: lm_kwargs.pop(k) for k in ("api_key", "timeout") if k in lm_kwargs}
            return dspy.LM(name, engine=ReplicaEngine(bases, **client), **lm_kwargs)
        if bases:
            lm_kwargs["api_base"] = bases[0]
    return dspy.LM(name, **lm_kwargs)


# settings of the embedded models' llama.cpp engine: what each means, and the value a model
# on a server has anyway (None: any value given is refused)
EMBEDDED_SETTINGS: dict[str, tuple[str, Any]] = {
    "n_ctx": ("a context window", None),
    "prefix_cache": ("llama.cpp's prompt cache", None),
    "constrained": ("decoding under each step's JSON schema", True),
    "merge_adapter": ("a LoRA adapter merged into the model file", False),
}


def _check_served_settings(name: str, lm_kwargs: dict[str, Any]) -> None:
    """An embedded engine's setting given for a model on a server (which has its server's
    window, cache and decoding, and no netcast adapter): one ``InputError`` naming it, rather
    than dropped or sent to the provider as a call argument."""
    for key, (what, served) in EMBEDDED_SETTINGS.items():
        if key in lm_kwargs and (served is None or lm_kwargs[key] != served):
            raise InputError(
                f"{key}={lm_kwargs[key]!r}: {what} is a setting of the embedded models "
                f"({', '.join(embedded.MODELS)}); {name} runs on a server, which has its own"
            )


def _check_settings(lm_kwargs: dict[str, Any]) -> None:
    """``api_base`` (one URL or several), ``num_retries`` and ``timeout`` as make_lm takes them."""
    bases = lm_kwargs.get("api_base")
    for base in [bases] if isinstance(bases, str) else list(bases or []):
        check_api_base(base)
    retries = lm_kwargs.get("num_retries")
    if retries is not None and (
        isinstance(retries, bool) or not isinstance(retries, int) or retries < 0
    ):
        raise InputError(f"retries per model call: {retries!r}; give a whole number >= 0")
    timeout = lm_kwargs.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not 0 < timeout < float("inf")
    ):
        raise InputError(f"timeout: {timeout!r} seconds; give a positive number of seconds")


def check_api_base(base: Any) -> str:
    """``base`` if it is an http(s) URL with a host, else one ``InputError``."""
    import httpx

    try:
        url = httpx.URL(str(base))
        usable = url.scheme in ("http", "https") and bool(url.host)
    except (httpx.InvalidURL, TypeError, ValueError):
        usable = False
    if not usable:
        raise InputError(
            f"api base {str(base)!r} is not an http:// or https:// URL with a host "
            "(e.g. http://127.0.0.1:8000/v1)"
        )
    return str(base)


def check_model_name(name: str, api_base: Any = None) -> None:
    """Refuse, before any call, a model name that is neither an embedded model nor one a
    provider answers to (litellm's provider table, or DSPy's own, offline): a misspelt
    embedded name, an unknown provider prefix, a bare name with no provider."""
    import difflib

    import litellm

    base = api_base if isinstance(api_base, str) else None
    quiet = litellm.suppress_debug_info
    litellm.suppress_debug_info = True  # litellm prints a provider list to stdout otherwise
    try:
        litellm.get_llm_provider(name, api_base=base)
        return
    except Exception:  # litellm's BadRequestError: no provider for this name
        pass
    finally:
        litellm.suppress_debug_info = quiet
    if _dspy_resolves(name):
        return
    close = difflib.get_close_matches(name, list(embedded.MODELS), n=1, cutoff=0.75)
    hint = f"did you mean {close[0]!r}? " if close else ""
    provider = name.partition("/")[0] if "/" in name else None
    known = f"no provider {provider!r} is known; " if provider else ""
    raise InputError(
        f"unknown model {name!r}: {hint}{known}give an embedded model "
        f"({', '.join(embedded.MODELS)}) or provider/model (e.g. openai/gpt-4o-mini; a local "
        "OpenAI-compatible server: openai/NAME with --api-base)"
    )


def _dspy_resolves(name: str) -> bool:
    """Whether DSPy's native engine knows a provider for ``name`` (offline)."""
    try:
        from dspy.clients.engines.lm15_engine import LM15Engine
        from dspy.lm15 import RouterConfig

        LM15Engine(RouterConfig(env={})).resolve(name)
        return True
    except Exception:  # unknown to it too
        return False


def configure(model: str | None = EMBEDDED, **lm_kwargs: Any) -> dspy.LM:
    """Make the LM for ``model`` and set it as DSPy's default (for scripts and the command
    line; library code passes LMs explicitly). Returns the LM."""
    lm = make_lm(model, **lm_kwargs)
    dspy.configure(lm=lm)
    return lm


def default_adapter(lm: Any) -> dspy.Adapter:
    """The adapter netcast runs ``lm``'s steps with: DSPy's JSONAdapter (``netcast.models.
    json_adapter``: it also formats fine-tuning data) where the model takes a
    JSON-schema ``response_format`` (a constrained embedded engine: every reply parses, a
    ``Literal`` field takes only its values; a provider with structured outputs), else DSPy's
    chat format (with JSON as the fallback) refusing a reply that repeats a field's header
    (``netcast.models.adapter``), also when no LM is given."""
    if lm is None:
        return ChatAdapter()
    try:
        structured = bool(lm.supports_response_schema)
    except Exception:  # a provider litellm cannot describe
        structured = False
    return JSONAdapter() if structured else ChatAdapter()


def decoding_info(lm: Any) -> dict[str, str]:
    """What a run records of ``lm``'s decoding beyond its name: ``{"decoding": "free"}`` for an
    embedded model with constrained decoding off, ``{"adapter": "merged"}`` for one serving a
    tuned model's adapter merged into its weights (so a run of either never resumes one under
    the defaults), else nothing."""
    engine = getattr(lm, "engine", None)
    info = {"decoding": "free"} if getattr(engine, "constrained", True) is False else {}
    return info | ({"adapter": "merged"} if getattr(engine, "merge_lora", False) is True else {})


def embedded_name(lm: Any) -> str | None:
    """The embedded model's netcast name if ``lm`` runs one, else None."""
    return getattr(lm, "embedded_name", None)


def context_window(lm: Any = None) -> int:
    """Input tokens ``lm`` accepts: an embedded engine's ``n_ctx``; litellm's model info
    (offline price map) for known models, else 128k. ``None`` means the embedded model at
    its default ``n_ctx``."""
    if lm is None:
        return int(os.environ.get("NETCAST_N_CTX", DEFAULT_N_CTX))
    engine = getattr(lm, "engine", None)
    if hasattr(engine, "n_ctx"):
        return int(engine.n_ctx)
    if not isinstance(engine, (str, ReplicaEngine)):  # a custom engine: assume 128k
        return 128_000
    import litellm

    try:
        info = litellm.get_model_info(getattr(lm, "model", ""))
    except Exception:  # a model litellm does not know
        return 128_000
    return int(info.get("max_input_tokens") or info.get("max_tokens") or 128_000)


def token_counter(lm: Any = None) -> TokenCounter:
    """The counter that matches ``lm``: an embedded model's own tokenizer (``None`` means the
    default embedded model), otherwise ``ApproxTokenCounter`` (tiktoken's cl100k_base)."""
    if lm is None:
        return embedded_counter(EMBEDDED)
    name = embedded_name(lm)
    return embedded_counter(name) if name else approx_counter()


QUESTION_SHARE = 4  # a question may take at most 1/QUESTION_SHARE of the model's window


def check_questions(questions: Iterable[tuple[str, str]], lm: Any = None) -> None:
    """Refuse, before any model call, a question too long for ``lm``: more than a quarter of
    its window, where passages and instructions need the rest. ``questions``: (where, text)
    pairs, ``where`` naming the question (an id, or the dataset file and line); one line
    ``InputError`` naming the first too long."""
    window = context_window(lm)
    limit = window // QUESTION_SHARE
    counter = token_counter(lm)
    for where, text in questions:
        if len(text.encode()) <= limit:  # a token holds at least one byte: short enough
            continue
        n = counter.count(text)
        if n > limit:
            name = getattr(lm, "model", None) or "the embedded model"
            raise InputError(
                f"{where}: {n:,} tokens, more than a quarter of {name}'s "
                f"{window:,}-token window (passages and instructions need the rest); shorten "
                "it, or give a model with a larger window (NETCAST_N_CTX for the embedded one)"
            )


def preflight(lm: Any) -> None:
    """Check, before any question runs, that ``lm`` can be called at all; raise
    ``ModelSetupError`` (a ``ModelCallError``: exit 2, nothing to resume) with one line if it
    cannot. In-process engines (the embedded models, a test's scripted engine) are not checked.

    - an API key the provider needs and nobody gave (litellm's ``validate_environment``; a
      local server that checks no key still needs some value in ``OPENAI_API_KEY``);
    - a server that lists its models (``GET <api_base>/models``, OpenAI's convention) must list
      this one, and must accept the key;
    - otherwise one tiny call (one output token, uncached): a rejected key, an unknown model
      or a refused request stops here.

    An endpoint that cannot be reached is not refused here: the run itself reports it after
    ``--max-errors`` failed questions (a server being started or restarted may come up)."""
    engine = getattr(lm, "engine", None)
    if isinstance(engine, ReplicaEngine):  # each replica as if it were alone
        for base in engine.bases:
            preflight(dspy.LM(lm.model, api_base=base, **(getattr(lm, "kwargs", {}) or {})))
        return
    if not isinstance(engine, str):
        return
    model = lm.model
    kwargs = getattr(lm, "kwargs", {}) or {}
    provider, _, model_id = model.partition("/")
    base = kwargs.get("api_base") or kwargs.get("base_url")
    if not base and provider == "openai":
        base = os.environ.get("OPENAI_API_BASE") or os.environ.get("OPENAI_BASE_URL")
    where = f"{model} at {base}" if base else model
    key = kwargs.get("api_key") or _key_in_environment(model, base, where)
    if base and _checked_against_list(base, key, kwargs, where, model_id):
        return
    _tiny_call(lm, where)


def _key_in_environment(model: str, base: str | None, where: str) -> str | None:
    """The API key the environment gives ``model`` (OpenAI's variable for an OpenAI-compatible
    server); a key the provider needs and nobody gave is refused in one line."""
    import litellm

    from netcast.errors import ModelSetupError

    try:
        found = litellm.validate_environment(model=model, api_base=base)
    except Exception:  # a provider litellm cannot describe: the call will tell
        found = {}
    missing = found.get("missing_keys") or []
    if found and not found.get("keys_in_environment", True) and missing:
        raise ModelSetupError(
            f"{where}: no API key: set {' or '.join(missing)} (a local server that "
            "checks no key takes any value, e.g. OPENAI_API_KEY=none)"
        )
    return os.environ.get("OPENAI_API_KEY") if model.startswith("openai/") else None


def _checked_against_list(
    base: str, key: str | None, kwargs: dict[str, Any], where: str, model_id: str
) -> bool:
    """Whether the server's model list settles the check: it lists the model (or cannot be
    reached now: the run reports it); a refused key or a model it does not serve is refused.
    False: no list in OpenAI's format, so a tiny call decides."""
    import httpx

    from netcast.errors import ModelSetupError

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        wait = min(10.0, float(kwargs.get("timeout") or 10.0))  # a hung server: not long
        reply = httpx.get(f"{base.rstrip('/')}/models", headers=headers, timeout=wait)
    except httpx.HTTPError:
        return True  # unreachable now: the run reports it (see preflight)
    if reply.status_code in (401, 403):
        raise ModelSetupError(f"{where}: the server refused the API key (HTTP {reply.status_code})")
    if reply.status_code != 200:
        return False
    try:
        served = [str(m["id"]) for m in reply.json()["data"]]
    except Exception:  # not OpenAI's list format: fall back to a tiny call
        return False
    if served and model_id not in served and f"{model_id}:latest" not in served:
        raise ModelSetupError(
            f"{where}: unknown model {model_id!r}; the server serves {', '.join(served[:20])}"
        )
    return True


def _tiny_call(lm: Any, where: str) -> None:
    """One output token, uncached: a rejected key, an unknown model or a refused request is
    refused in one line; anything else (unreachable, rate-limited, timed out) the run tells."""
    import logging

    from dspy.utils.exceptions import (
        LMAuthError,
        LMBillingError,
        LMNotConfiguredError,
        LMUnsupportedModelError,
    )

    from netcast.errors import ModelSetupError

    refused = (LMAuthError, LMBillingError, LMNotConfiguredError, LMUnsupportedModelError)
    quiet = logging.getLogger("dspy.clients.lm")  # not the truncation warning of 1 token
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        lm.copy(cache=False, num_retries=0)("Reply with OK.", max_tokens=1)
    except refused as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ModelSetupError(f"{where}: {first}") from err
    except Exception:  # unreachable, rate-limited, timed out, anything else: the run tells
        return
    finally:
        quiet.setLevel(level)


def endpoint(lm: Any) -> str:
    """Where ``lm``'s calls go, for messages: its ``api_base`` (an ``openai/`` model's may come
    from ``OPENAI_API_BASE``), else its model string."""
    kwargs = getattr(lm, "kwargs", None) or {}
    model = str(getattr(lm, "model", lm))
    base = kwargs.get("api_base") or kwargs.get("base_url")
    bases = getattr(getattr(lm, "engine", None), "bases", None)
    if bases:  # replicas (netcast.models.replicas)
        base = " and ".join(bases)
    if not base and model.startswith("openai/"):
        base = os.environ.get("OPENAI_API_BASE") or os.environ.get("OPENAI_BASE_URL")
    return str(base or model)
