import dspy

from netcast import settings
from netcast.models import embedded, factory


def test_use_netcast_cache_puts_dspy_cache_under_netcast_home(netcast_home):
    factory.use_netcast_cache()
    assert str(settings.cache_dir()).startswith(str(netcast_home))
    assert dspy.cache.disk_cache.directory == str(settings.cache_dir())


def test_litellm_models_get_temperature_zero_retries_and_the_approx_counter():
    lm = factory.make_lm("openai/gpt-4o-mini")
    assert type(lm) is dspy.LM and lm.model == "openai/gpt-4o-mini"
    assert lm.kwargs["temperature"] == 0.0 and lm.num_retries == 3
    assert factory.token_counter(lm).name.startswith("tiktoken")
    assert factory.embedded_name(lm) is None


def test_make_lm_does_not_touch_dspy_settings_and_configure_does():
    before = dspy.settings.lm
    lm = factory.make_lm("openai/gpt-4o-mini")
    assert dspy.settings.lm is before
    try:
        configured = factory.configure("openai/gpt-4o-mini")
        assert dspy.settings.lm is configured and configured is not lm
    finally:
        dspy.configure(lm=before)


def test_model_name_spells_no_model_as_embedded():
    assert factory.model_name(None) == "embedded"
    assert factory.model_name("") == "embedded"
    assert factory.model_name("openai/gpt-4o-mini") == "openai/gpt-4o-mini"


def test_context_window_of_embedded_engines_litellm_models_and_none(monkeypatch):
    class Engine:
        n_ctx = 4096

    class Local:
        engine = Engine()

    assert factory.context_window(Local()) == 4096
    monkeypatch.delenv("NETCAST_N_CTX", raising=False)
    assert factory.context_window(None) == embedded.DEFAULT_N_CTX == 8192
    monkeypatch.setenv("NETCAST_N_CTX", "2048")
    assert factory.context_window(None) == 2048
    assert factory.context_window(factory.make_lm("openai/gpt-4o-mini")) == 128_000
    assert factory.context_window(dspy.LM("unknown-provider/unknown-model")) == 128_000


def test_token_counter_of_no_lm_is_the_embedded_tokenizer():
    assert factory.token_counter(None).name == "llama:qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def test_a_question_longer_than_a_quarter_of_the_window_is_refused_naming_it():
    import pytest

    from netcast.errors import InputError

    lm = factory.make_lm("openai/gpt-4o-mini")  # 128k window: at most 32,000 tokens
    short = ("q1", "What is the capital of France?")
    factory.check_questions([short, ("q2", "word " * 31_000)], lm)  # ~31k tokens: fits
    with pytest.raises(InputError, match=r"^q3: 3\d,\d{3} tokens, more than a quarter of "):
        factory.check_questions([short, ("q3", "word " * 33_000)], lm)


def test_an_endpoint_for_the_embedded_model_is_one_line_before_it_loads():
    import pytest

    from netcast.errors import InputError

    for name in (None, "embedded", "embedded-1.5b"):
        with pytest.raises(InputError, match="--api-base: embedded.* runs in this process"):
            factory.make_lm(name, api_base="http://localhost:8080/v1")


def test_an_embedded_setting_for_a_served_model_is_one_line_not_dropped():
    """A window, llama.cpp's prompt cache, free decoding or a merged adapter mean nothing to a
    model on a server: each is refused naming it (they were dropped, or n_ctx sent to litellm);
    the values a server has anyway pass."""
    import pytest

    from netcast.errors import InputError

    for setting in (
        {"n_ctx": 4096},
        {"prefix_cache": "off"},
        {"constrained": False},
        {"merge_adapter": True},
    ):
        (key,) = setting
        with pytest.raises(InputError, match=rf"^{key}=.* openai/gpt-4o-mini runs on a server"):
            factory.make_lm("openai/gpt-4o-mini", **setting)
    lm = factory.make_lm("openai/gpt-4o-mini", constrained=True, merge_adapter=False)
    assert not {"constrained", "merge_adapter", "n_ctx"} & set(lm.kwargs)
