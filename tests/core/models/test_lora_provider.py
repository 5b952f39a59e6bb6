"""Fine-tuning the embedded model (netcast.models.lora_provider, lora, json_adapter): tuned model
ids, the tuned LM's engine and cache, the fine-tuning data's format, and bad input refused with
one line before anything trains. Training itself: tests/core/models/test_training.py."""

import dataclasses
import json

import dspy
import numpy as np
import pytest
from dspy.teleprompt.bootstrap_finetune import build_call_data_from_trace

from helpers import GGUFEngine, tiny_base
from netcast.errors import InputError, ModelFileError
from netcast.models import embedded, lora, lora_provider, training
from netcast.models.factory import EmbeddedLM, default_adapter, make_lm
from netcast.models.json_adapter import JSONAdapter
from netcast.testing import SchemaEngine

SPEC = embedded.spec()
SHA = "ab" * 32


def chats(n: int) -> list[dict]:
    return [
        {
            "messages": [
                {"role": "system", "content": "Answer."},
                {"role": "user", "content": f"question {i}"},
                {"role": "assistant", "content": '{"answer": "x"}'},
            ]
        }
        for i in range(n)
    ]


# -- model ids ----------------------------------------------------------------------------------


def test_a_tuned_model_id_names_its_base_and_its_adapters_sha256():
    model = lora.tuned_model_id(SPEC, SHA)
    assert model == f"netcast/{SPEC.model_name}+lora-{SHA}"
    assert lora.parse_model_id(model) == (SPEC, SHA)
    assert lora.parse_model_id(f"netcast/{SPEC.model_name}") == (SPEC, None)
    assert lora.parse_model_id("embedded-1.5b") == (embedded.spec("embedded-1.5b"), None)


@pytest.mark.parametrize(
    "model",
    ["openai/gpt-4o-mini", "ollama_chat/qwen2.5", f"netcast/{SPEC.model_name}+lora-abc", "x"],
)
def test_a_model_with_no_weights_here_is_refused_in_one_line(model):
    with pytest.raises(InputError, match="no weights here to train") as err:
        lora_provider.check_trainable(model)
    assert "\n" not in str(err.value)


def test_finetuning_an_api_model_through_dspy_is_refused_before_training(monkeypatch):
    monkeypatch.setattr(training, "load_base", _no_training)
    lm = dspy.LM("openai/gpt-4o-mini", provider=lora_provider.LlamaCppProvider(progress=False))
    job = lm.finetune(chats(10), "chat")
    result = job.result()
    assert isinstance(result, InputError)
    assert "openai/gpt-4o-mini: not an embedded model" in str(result)


def test_the_embedded_lm_trains_with_the_cpu_provider():
    lm = make_lm("embedded")
    assert isinstance(lm.provider, lora_provider.LlamaCppProvider)
    assert lm.provider.finetunable


# -- the tuned LM: its engine and DSPy's cache --------------------------------------------------


def _store_adapter(spec=SPEC, rank: int = 2, base_for_names=SPEC) -> str:
    """A small real adapter file (layer 0's query projection) for ``spec`` in the store."""
    weights = {
        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": np.ones((rank, 896)),
        "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": np.zeros((896, rank)),
    }
    record = lora.write_adapter(
        weights,
        spec,
        embedded.model_path(base_for_names.name),
        alpha=2.0 * rank,
        rank=rank,
        meta={"settings": {"rank": rank}, "examples": 3, "loss_curve": [2.0, 1.5]},
    )
    return record.sha256


def test_a_copy_for_a_tuned_id_runs_the_adapter_and_a_copy_back_runs_the_base():
    sha = _store_adapter()
    base = make_lm("embedded")
    tuned = base.copy(model=lora.tuned_model_id(SPEC, sha))
    assert tuned.engine is not base.engine
    assert tuned.engine.lora_path == str(lora.adapter_path(sha))
    assert tuned.engine.model_path == base.engine.model_path
    assert base.engine.lora_path is None
    again = tuned.copy(model=base.model)
    assert again.engine.lora_path is None
    assert tuned.embedded_name == "embedded"


def test_a_tuned_lm_never_serves_the_base_models_cached_answers():
    sha = _store_adapter()
    path = str(embedded.model_path())
    base = EmbeddedLM("embedded", GGUFEngine(path), cache=True, num_retries=0)
    question = "What is the capital of France?"  # a prompt: DSPy sends it as one user message
    assert "base" in base(question)[0]
    calls = len(base.engine.prompts)
    assert "base" in base(question)[0]
    assert len(base.engine.prompts) == calls  # the cache answered
    tuned = base.copy(model=lora.tuned_model_id(SPEC, sha))
    assert "tuned" in tuned(question)[0]
    assert len(tuned.engine.prompts) == 1  # its own engine was asked


def test_a_copy_for_an_unknown_adapter_is_refused_in_one_line():
    base = make_lm("embedded")
    with pytest.raises(ModelFileError, match="adapter record not found"):
        base.copy(model=lora.tuned_model_id(SPEC, "cd" * 32))


# -- bad adapters -------------------------------------------------------------------------------


def test_an_adapter_of_another_base_model_is_refused_in_one_line():
    other = dataclasses.replace(SPEC, name="other", sha256="0" * 64)
    sha = _store_adapter(spec=other)
    with pytest.raises(ModelFileError, match="trained on another base model") as err:
        make_lm("embedded").copy(model=lora.tuned_model_id(SPEC, sha))
    assert "\n" not in str(err.value)


def test_an_adapter_whose_header_names_another_base_is_refused():
    other = dataclasses.replace(SPEC, name="other", sha256="0" * 64)
    sha = _store_adapter(spec=other)
    record = json.loads(lora.record_path(sha).read_text())
    record["base_sha256"], record["base"] = SPEC.sha256, SPEC.name  # an edited record
    lora.record_path(sha).write_text(json.dumps(record))
    with pytest.raises(ModelFileError, match="header names base sha256 000000000000"):
        lora.verified_adapter(sha, SPEC)


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_adapter_file_is_refused_in_one_line(damage):
    sha = _store_adapter()
    path = lora.adapter_path(sha)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-1] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="adapter file damaged") as err:
        lora.verified_adapter(sha, SPEC)
    assert "\n" not in str(err.value)


def test_a_file_that_is_no_gguf_adapter_is_refused(tmp_path):
    sha = _store_adapter()
    path = lora.adapter_path(sha)
    path.write_bytes(b"not a gguf" * 10)
    record = json.loads(lora.record_path(sha).read_text())
    new_sha = embedded.sha256_of(path)
    record.update(sha256=new_sha, size=path.stat().st_size)
    path.rename(lora.adapter_path(new_sha))
    lora.record_path(new_sha).write_text(json.dumps(record))
    with pytest.raises(ModelFileError, match="not a readable GGUF LoRA adapter"):
        lora.verified_adapter(new_sha, SPEC)


# -- the GGUF file llama.cpp reads --------------------------------------------------------------


def test_the_adapter_is_a_gguf_lora_with_the_names_and_shapes_llama_cpp_expects():
    import gguf

    sha = _store_adapter(rank=2)
    reader = gguf.GGUFReader(str(lora.adapter_path(sha)))

    def value(key):
        return reader.fields[key].contents()

    assert value("general.type") == "adapter"
    assert value("general.architecture") == "qwen2"
    assert value("adapter.type") == "lora"
    assert value("adapter.lora.alpha") == 4.0
    assert value("netcast.base_sha256") == SPEC.sha256
    shapes = {t.name: [int(n) for n in t.shape] for t in reader.tensors}
    # llama.cpp: a.ne[0] == the base tensor's ne[0] (its input), b.ne[1] == its ne[1] (output),
    # a.ne[1] == b.ne[0] (the rank)
    assert shapes == {
        "blk.0.attn_q.weight.lora_a": [896, 2],
        "blk.0.attn_q.weight.lora_b": [2, 896],
    }
    assert lora.base_shape(embedded.model_path()).embedding == 896  # blk.0.attn_q: 896 x 896
    record = lora.read_record(sha)
    assert (record.sha256, record.base_sha256, record.rank) == (sha, SPEC.sha256, 2)
    assert record.loss_curve == [2.0, 1.5] and record.settings == {"rank": 2}
    assert embedded.sha256_of(lora.adapter_path(sha)) == sha


def test_an_adapter_exports_to_a_peft_folder_with_the_same_numbers(tmp_path):
    """export-adapter: the GGUF LoRA as peft writes one (what vLLM --enable-lora and peft
    load), each tensor under its peft name with the same f16 numbers, rank and alpha kept."""
    from peft import LoraConfig
    from safetensors.numpy import load_file

    rng = np.random.default_rng(0)
    weights = {
        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": rng.normal(size=(2, 896)),
        "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": rng.normal(size=(896, 2)),
        "base_model.model.model.layers.5.mlp.down_proj.lora_A.weight": rng.normal(size=(2, 4864)),
        "base_model.model.model.layers.5.mlp.down_proj.lora_B.weight": rng.normal(size=(896, 2)),
    }
    record = lora.write_adapter(
        weights, SPEC, embedded.model_path(), alpha=8.0, rank=2, meta={"settings": {}}
    )
    config = lora.write_peft_adapter(lora.adapter_path(record.sha256), tmp_path / "peft")
    exported = load_file(str(tmp_path / "peft" / "adapter_model.safetensors"))
    assert sorted(exported) == sorted(weights)
    for name, array in weights.items():
        assert np.array_equal(exported[name], array.astype(np.float16)), name
    assert (config["r"], config["lora_alpha"]) == (2, 8.0)
    assert config["target_modules"] == ["down_proj", "q_proj"]
    assert config["base_model_name_or_path"] == "Qwen/Qwen2.5-Coder-0.5B-Instruct"
    loaded = LoraConfig.from_pretrained(str(tmp_path / "peft"))
    assert (loaded.r, loaded.lora_alpha, set(loaded.target_modules)) == (
        2, 8.0, {"down_proj", "q_proj"}
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "base_model.model.model.layers.3.self_attn.k_proj.lora_A.weight",
            ("blk.3.attn_k.weight", "a"),
        ),
        (
            "base_model.model.model.layers.3.self_attn.o_proj.lora_B.weight",
            ("blk.3.attn_output.weight", "b"),
        ),
        (
            "base_model.model.model.layers.23.mlp.gate_proj.lora_A.weight",
            ("blk.23.ffn_gate.weight", "a"),
        ),
        ("base_model.model.model.layers.0.mlp.up_proj.lora_A.weight", ("blk.0.ffn_up.weight", "a")),
        (
            "base_model.model.model.layers.0.mlp.down_proj.lora_B.weight",
            ("blk.0.ffn_down.weight", "b"),
        ),
        (
            "base_model.model.model.layers.0.self_attn.v_proj.lora_B.weight",
            ("blk.0.attn_v.weight", "b"),
        ),
    ],
)
def test_peft_names_map_to_the_base_gguf_tensor_names(name, expected):
    import gguf

    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, 24)
    assert lora.lora_tensor_name(name, names) == expected


# -- fine-tuning data: the inference prompt -----------------------------------------------------


class QA(dspy.Signature):
    """Answer the question from the context."""

    context: str = dspy.InputField()
    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def test_finetune_data_is_the_chat_the_model_is_shown_at_inference_then_its_reply():
    engine = SchemaEngine(lambda prompt: {"answer": "Paris"})
    lm = dspy.LM("scripted/json", engine=engine, cache=False, num_retries=0)
    adapter = default_adapter(lm)
    assert isinstance(adapter, JSONAdapter)
    seen = []
    original = engine.complete

    def record(request):
        seen.append(
            [{"role": "system", "content": request.system}]
            + [{"role": m.role, "content": m.text} for m in request.messages]
        )
        return original(request)

    engine.complete = record
    predict = dspy.Predict(QA)
    predict.demos = [
        dspy.Example(context="Berlin is in Germany.", question="Where?", answer="Germany")
    ]
    with dspy.context(lm=lm, adapter=adapter, trace=[]):
        predict(context="Paris is in France.", question="Capital of France?")
        trace = dspy.settings.trace
    data = build_call_data_from_trace(trace, 0, adapter)
    *prompt, reply = data["messages"]
    assert prompt == seen[0]
    assert len(prompt) == 4  # system, the demo's question and answer, the question
    assert reply["role"] == "assistant"
    assert adapter.parse(QA, reply["content"]) == {"answer": "Paris"}
    assert json.loads(reply["content"]) == {"answer": "Paris"}


# -- bad input, before any training ------------------------------------------------------------


def _no_training(*args, **kwargs):
    raise AssertionError("training started")


def test_too_few_examples_are_refused_before_training(monkeypatch):
    monkeypatch.setattr(training, "load_base", _no_training)
    with pytest.raises(InputError, match="only 3 finetune example.s. after filtering; at least 8"):
        lora_provider.finetune("embedded", chats(3))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ([{"messages": [{"role": "user", "content": "q"}]}] * 9, "example 0: field messages"),
        ([{"prompt": "q"}] * 9, "example 0: field messages"),
        ("data.jsonl", "a list of examples expected"),
    ],
)
def test_malformed_examples_are_refused_naming_the_example(monkeypatch, data, match):
    monkeypatch.setattr(training, "load_base", _no_training)
    with pytest.raises(InputError, match=match):
        lora_provider.finetune("embedded", data)


def test_a_missing_finetune_extra_is_one_line(monkeypatch):
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "peft" else found(name, *a)
    )
    with pytest.raises(
        InputError, match=r'peft not installed: .*pip install "netcast\[finetune\]"'
    ):
        lora_provider.finetune("embedded", chats(8))


def test_unknown_or_bad_settings_are_refused():
    with pytest.raises(InputError, match="unknown lr; known: "):
        lora_provider.TrainSettings.of({"lr": 1e-4})
    with pytest.raises(InputError, match="rank=0"):
        lora_provider.TrainSettings.of({"rank": 0})
    with pytest.raises(InputError, match="threads=0"):
        lora_provider.TrainSettings.of({"threads": 0})
    assert lora_provider.TrainSettings.of({"epochs": 2}).epochs == 2


def test_not_enough_memory_is_refused_before_training(monkeypatch):
    monkeypatch.setattr(training, "load_base", _no_training)
    monkeypatch.setattr(lora_provider, "available_memory", lambda: 1 << 30)
    with pytest.raises(
        InputError,
        match=r"not enough memory to finetune embedded with gradient checkpointing: about \d.*"
        "shorten the longest examples",
    ):
        lora_provider.finetune("embedded", chats(8))
    # checkpointing turned off by hand, where it would not fit either: no false hope
    with pytest.raises(InputError, match="embedded: about .*shorten the longest examples"):
        lora_provider.finetune("embedded", chats(8), {"gradient_checkpointing": False})


def test_gradient_checkpointing_is_on_only_where_memory_needs_it():
    shape = lora.base_shape(embedded.model_path())
    plain = lora_provider.memory_needed(shape, 2_000)
    recomputed = lora_provider.memory_needed(shape, 2_000, checkpointed=True)
    assert recomputed < plain
    cfg = lora_provider.TrainSettings()
    path = embedded.model_path()

    def plan(have, **settings):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(lora_provider, "available_memory", lambda: have)
            return lora_provider.check_resources(
                SPEC, path, dataclasses.replace(cfg, **settings), 2_000
            )

    assert plan(plain + 1) == lora_provider.MemoryPlan(plain, False)
    assert plan(plain - 1) == lora_provider.MemoryPlan(recomputed, True)
    assert plan(plain + 1, gradient_checkpointing=True) == lora_provider.MemoryPlan(
        recomputed, True
    )
    with pytest.raises(InputError, match="leave gradient_checkpointing unset"):
        plan(plain - 1, gradient_checkpointing=False)
    for bad in ("yes", 1, 0.0):
        with pytest.raises(InputError, match=f"gradient_checkpointing={bad!r}; give true, false"):
            lora_provider.TrainSettings.of({"gradient_checkpointing": bad})


def test_the_memory_estimate_scales_each_token_with_the_models_width():
    # the shapes the two embedded models' GGUF headers give (lora.base_shape)
    small = lora.BaseShape("qwen2", 24, 896, 4_864, 14, 2, 151_936)
    large = lora.BaseShape("qwen2", 28, 1_536, 8_960, 12, 2, 151_936)
    per_token = [
        lora_provider.memory_needed(s, 1_000) - lora_provider.memory_needed(s, 0)
        for s in (small, large)
    ]
    assert per_token[0] == 1_000 * lora_provider.BYTES_PER_TOKEN
    # the 1.5B is charged 2.1x the 0.5B's bytes a token: blocks x (embedding + feed-forward)
    assert per_token[1] / per_token[0] == pytest.approx(28 * 10_496 / (24 * 5_760))
    bf16 = lora_provider.memory_needed(large, 0, dtype="bfloat16")
    assert bf16 == large.parameters() * lora_provider.BYTES_PER_PARAM
    # a float32 base (a CPU without hardware bf16) holds 2 more bytes a weight
    fp32 = lora_provider.memory_needed(large, 1_000, dtype="float32")
    assert fp32 - lora_provider.memory_needed(large, 1_000, dtype="bfloat16") == (
        2 * large.parameters()
    )
    # with gradient checkpointing a token costs the same on both (measured so)
    for shape in (small, large):
        extra = lora_provider.memory_needed(shape, 1_000, True) - lora_provider.memory_needed(
            shape, 0, True
        )
        assert extra == 1_000 * lora_provider.BYTES_PER_TOKEN_CHECKPOINTED


def test_not_enough_disk_is_refused_before_training(monkeypatch):
    monkeypatch.setattr(training, "load_base", _no_training)
    monkeypatch.setattr(lora_provider, "available_memory", lambda: 1 << 40)
    monkeypatch.setattr(lora_provider, "free_disk", lambda path: 1 << 20)
    with pytest.raises(InputError, match="not enough disk in .* to finetune embedded"):
        lora_provider.finetune("embedded", chats(8))


def test_an_example_longer_than_max_tokens_is_refused_before_training(monkeypatch):
    monkeypatch.setattr(training, "load_base", _no_training)
    data = chats(8)
    data[5]["messages"][1]["content"] = "word " * 300
    with pytest.raises(InputError, match="example 5: 3.. tokens, more than max_tokens=256"):
        lora_provider.finetune("embedded", data, {"max_tokens": 256})


def test_the_memory_and_disk_estimates_count_the_05b_models_parameters():
    shape = lora.base_shape(embedded.model_path())
    # the GGUF holds 630,167,424 parameters: 494M and an untied output matrix (151,936 x 896)
    assert shape.parameters() == pytest.approx(630_167_424, rel=0.001)
    assert shape.lora_per_rank() * 16 * 2 == pytest.approx(17.6e6, rel=0.01)  # f16 adapter bytes


# -- the provider end to end, with a tiny model in place of the 0.5B ------------------------------


TRAIN = training.train


def watch_training(monkeypatch, interrupt_at=None):
    """Runs seen by ``training.train`` (their results); SIGINT at step ``interrupt_at``."""
    import os
    import signal

    seen, original = [], TRAIN

    def watched(*args, on_step=None, **kwargs):
        def step(done, total, loss):
            on_step(done, total, loss)
            if done == interrupt_at:
                os.kill(os.getpid(), signal.SIGINT)

        seen.append(original(*args, on_step=step, **kwargs))
        seen[-1].longest = max(len(example.ids) for example in args[1])
        return seen[-1]

    monkeypatch.setattr(training, "load_base", tiny_base)
    monkeypatch.setattr(training, "train", watched)
    return seen


def test_lm_finetune_trains_writes_the_adapter_and_returns_an_lm_serving_it(monkeypatch):
    seen = watch_training(monkeypatch)
    lm = make_lm("embedded")
    tuned = lm.finetune(chats(8), "chat", {"learning_rate": 1e-3}).result()
    assert not isinstance(tuned, Exception), tuned
    spec, sha = lora.parse_model_id(tuned.model)
    assert tuned.model == lora.tuned_model_id(SPEC, sha) != lm.model
    assert tuned.engine.lora_path == str(lora.adapter_path(sha))
    record = lora.read_record(sha)
    assert record.examples == 8 and record.loss_curve == pytest.approx(seen[0].losses)
    assert record.settings["learning_rate"] == 1e-3 and record.settings["rank"] == 16
    assert record.base_sha256 == SPEC.sha256 and record.seconds > 0 and record.peak_memory > 0
    # the memory check's estimate is kept beside the measured peak, for the longest example
    assert record.longest_tokens == seen[0].longest > 0
    shape = lora.base_shape(embedded.model_path())
    assert record.memory_estimate == lora_provider.memory_needed(shape, seen[0].longest)
    assert record.gradient_checkpointing is False  # short examples fit without it
    assert not list(lora_provider.checkpoints_dir().glob("*.pt"))


def test_a_finished_training_is_not_run_again_while_its_adapter_is_stored(monkeypatch):
    # a run that fails after its training (scoring the tuned program, the next step's adapter)
    # takes the same call's adapter back; a damaged or deleted adapter trains again
    seen = watch_training(monkeypatch)
    lm = make_lm("embedded")
    first = lm.finetune(chats(8), "chat").result()
    assert not isinstance(first, Exception), first and len(seen) == 1
    again = lm.finetune(chats(8), "chat").result()
    assert again.model == first.model and len(seen) == 1
    other = lm.finetune(chats(9), "chat").result()  # other examples: a training of its own
    assert other.model != first.model and len(seen) == 2
    sha = lora.parse_model_id(first.model)[1]
    lora.adapter_path(sha).write_bytes(b"damaged")
    retrained = lm.finetune(chats(8), "chat").result()
    assert not isinstance(retrained, Exception) and len(seen) == 3


def test_a_training_continues_from_the_adapter_init_names(monkeypatch, tmp_path):
    """``init``: the LoRA starts as the given adapter (an artifact's lora.gguf), not fresh;
    the adapter started from is part of what the training is (its sha256 in the settings),
    so the same examples from another start train an adapter of their own."""
    seen = watch_training(monkeypatch)
    starts = []
    watched = training.train

    def recording(model, *args, **kwargs):
        starts.append(
            {k: v.detach().float().clone() for k, v in training.lora_weights(model).items()}
        )
        return watched(model, *args, **kwargs)

    monkeypatch.setattr(training, "train", recording)
    lm = make_lm("embedded")
    first = lm.finetune(chats(8), "chat", {"learning_rate": 1e-3}).result()
    assert not isinstance(first, Exception), first
    sha = lora.parse_model_id(first.model)[1]
    artifact = tmp_path / "tuned"
    artifact.mkdir()
    (artifact / "lora.gguf").write_bytes(lora.adapter_path(sha).read_bytes())
    fresh_b = [v for k, v in starts[0].items() if "lora_B" in k]
    assert all(float(v.abs().max()) == 0.0 for v in fresh_b)  # peft's fresh B is zero

    kwargs = {"learning_rate": 1e-3, "init": str(artifact)}
    second = lm.finetune(chats(8), "chat", kwargs).result()
    assert not isinstance(second, Exception), second
    assert second.model != first.model and len(seen) == 2
    trained, _ = lora.peft_tensors(lora.adapter_path(sha))
    assert sorted(starts[1]) == sorted(trained)
    for name, value in trained.items():
        assert np.allclose(starts[1][name].numpy(), value.astype(np.float32)), name
    record = lora.read_record(lora.parse_model_id(second.model)[1])
    assert record.settings["init_sha256"] == sha and "init" not in record.settings
    assert "init_sha256" not in lora.read_record(sha).settings


@pytest.mark.parametrize(
    ("init", "match"),
    [
        ("nowhere", "init: nowhere: not found"),
        (".", "init: . holds no lora.gguf"),
        ("rank", "has rank 2 and alpha 8; this training rank 16 and alpha 32"),
    ],
)
def test_an_init_adapter_that_cannot_start_this_training_is_one_line(monkeypatch, init, match):
    monkeypatch.setattr(training, "load_base", _no_training)
    if init == "rank":
        weights = {
            "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight": np.ones((2, 896)),
            "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight": np.ones((896, 2)),
        }
        record = lora.write_adapter(
            weights, SPEC, embedded.model_path(), alpha=8.0, rank=2, meta={"settings": {}}
        )
        init = str(lora.adapter_path(record.sha256))
    with pytest.raises(InputError, match=match):
        lora_provider.finetune("embedded", chats(8), {"init": init})


def test_a_training_that_fits_only_with_gradient_checkpointing_runs_with_it(monkeypatch):
    seen = watch_training(monkeypatch)
    recomputed = []
    original = training.checkpoint_activations
    monkeypatch.setattr(
        training, "checkpoint_activations", lambda m: recomputed.append(m) or original(m)
    )
    data = chats(8)
    tokenizer = training.ChatTokenizer(embedded.model_path())
    longest = max(len(tokenizer.encode(c["messages"]).ids) for c in data)
    shape = lora.base_shape(embedded.model_path())
    room = lora_provider.memory_needed(shape, longest, checkpointed=True) + 1
    assert room < lora_provider.memory_needed(shape, longest)
    monkeypatch.setattr(lora_provider, "available_memory", lambda: room)
    tuned = make_lm("embedded").finetune(data, "chat").result()
    assert not isinstance(tuned, Exception), tuned
    record = lora.read_record(lora.parse_model_id(tuned.model)[1])
    assert record.gradient_checkpointing is True and len(recomputed) == 1 and seen
    assert record.memory_estimate == room - 1


def test_ctrl_c_during_lm_finetune_saves_exits_130_and_the_same_call_resumes(monkeypatch):
    import signal

    before = signal.getsignal(signal.SIGINT)
    seen = watch_training(monkeypatch, interrupt_at=3)
    lm = make_lm("embedded")
    result = lm.finetune(chats(8), "chat").result()
    assert isinstance(result, training.TrainingInterrupted)
    # the signal is handled in the main thread while the job's thread trains: the step in
    # progress then (the 3rd or 4th) is finished and saved
    import re

    stopped = int(re.search(r"after step (\d) of 8; checkpoint saved in ", str(result)).group(1))
    assert result.exit_code == 130 and stopped in (3, 4)
    assert signal.getsignal(signal.SIGINT) is before
    assert len(list(lora_provider.checkpoints_dir().glob("*.pt"))) == 1

    seen = watch_training(monkeypatch)
    tuned = lm.finetune(chats(8), "chat").result()
    assert not isinstance(tuned, Exception), tuned
    assert seen[0].resumed_at == stopped and len(seen[0].losses) == 8
    assert lora.read_record(lora.parse_model_id(tuned.model)[1]).examples == 8


def test_the_progress_bar_starts_before_the_first_step_and_prints_a_line_at_the_last(
    monkeypatch, capsys
):
    starts = []
    original = training.StepProgress.start
    monkeypatch.setattr(
        training.StepProgress,
        "start",
        lambda self, step, total: starts.append((step, total)) or original(self, step, total),
    )
    steps = []

    def counted(*args, on_step=None, **kwargs):
        def step(done, total, loss):
            steps.append((done, bool(starts)))
            on_step(done, total, loss)

        return TRAIN(*args, on_step=step, **kwargs)

    monkeypatch.setattr(training, "load_base", tiny_base)
    monkeypatch.setattr(training, "train", counted)
    lora_provider.finetune("embedded", chats(8), progress=True)
    # the bar (its clock) started once, at step 0, before the first step ended
    assert starts == [(0, 8)] and steps[0] == (1, True)
    assert "step 8/8" in capsys.readouterr().err  # stderr is no terminal here: a plain last line


def test_a_second_ctrl_c_interrupts_at_once():
    import os
    import signal

    # Python's own Ctrl-C handler before the job (whatever an earlier test left installed)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    job = lora_provider.CpuTrainingJob()
    try:
        os.kill(os.getpid(), signal.SIGINT)
        assert job.stop.is_set()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        job.restore_sigint()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        signal.signal(signal.SIGINT, before)


def test_dspy_bootstrap_finetune_compiles_a_program_onto_the_tuned_model(monkeypatch):
    seen = watch_training(monkeypatch)
    engine = SchemaEngine(lambda prompt: {"answer": "Paris"})
    lm = EmbeddedLM("embedded", engine, cache=False, num_retries=0)
    student = dspy.Predict(QA)
    student.lm = lm
    trainset = [
        dspy.Example(
            context=f"Paris is in France ({i}).", question="Capital?", answer="Paris"
        ).with_inputs("context", "question")
        for i in range(8)
    ]
    optimizer = dspy.BootstrapFinetune(
        metric=lambda example, prediction, trace=None: prediction.answer == example.answer,
        adapter=default_adapter(lm),
        train_kwargs={"min_examples": 8},
        num_threads=1,
    )
    with dspy.context(adapter=default_adapter(lm)):
        compiled = optimizer.compile(student, trainset=trainset)
    tuned = compiled.lm
    assert tuned.model.startswith(lm.model + "+lora-")
    record = lora.read_record(lora.parse_model_id(tuned.model)[1])
    assert record.examples == 8 and len(seen[0].losses) == 8


@pytest.mark.parametrize(("native", "dtype"), [(True, "bfloat16"), (False, "float32")])
def test_the_base_trains_in_bf16_only_where_the_cpu_computes_it(monkeypatch, native, dtype):
    # an AVX2-only CPU (an AMD EPYC VM here) emulates bf16 matrix products about 100x slower
    # than float32's: there the base is loaded, and the memory charged, as float32
    monkeypatch.setattr(training, "native_bf16", lambda: native)
    assert training.train_dtype() == dtype
    shape = lora.base_shape(embedded.model_path())
    assert lora_provider.memory_needed(shape, 500) == lora_provider.memory_needed(
        shape, 500, dtype=dtype
    )


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_training_loads_the_base_in_the_cpus_dtype_and_records_it(monkeypatch, dtype):
    loaded = []

    def recording_base(model_path, dtype=None):
        loaded.append(dtype)
        return tiny_base(model_path, dtype)

    monkeypatch.setattr(training, "train_dtype", lambda: dtype)
    monkeypatch.setattr(training, "load_base", recording_base)
    model = lora_provider.finetune("embedded", chats(8), {"min_examples": 4, "progress": False})
    assert loaded == [dtype]
    record = lora.read_record(lora.parse_model_id(model)[1])
    # a float32 training is told apart from a bfloat16 one (its checkpoint, its record)
    assert record.settings.get("dtype") == (None if dtype == "bfloat16" else "float32")
