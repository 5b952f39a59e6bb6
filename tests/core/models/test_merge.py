"""A tuned model merged into one GGUF file (netcast.models.merge): the merged weights are the
base's plus llama.cpp's LoRA delta, every other tensor and key is the base's, and the file is
built once per (base, adapter) pair, content-addressed, rebuilt when damaged."""

import os
from typing import ClassVar

import gguf
import numpy as np
import pytest

from helpers import tiny_gguf_adapter, tiny_gguf_base
from netcast.errors import InputError
from netcast.models import embedded, lora, merge

TARGETS = {"blk.0.attn_q.weight": (64, 64), "blk.1.ffn_down.weight": (64, 128)}
RANK, ALPHA = 4, 8.0


@pytest.fixture
def pair(tmp_path, monkeypatch):
    """(base path, base sha256, adapter sha256, {name: (A, B)}) in a fresh models dir."""
    monkeypatch.setenv("NETCAST_MODELS_DIR", str(tmp_path / "models"))
    base = tiny_gguf_base(tmp_path / "base.gguf")
    staged = tmp_path / "adapter.gguf"
    pairs = tiny_gguf_adapter(staged, TARGETS, rank=RANK, alpha=ALPHA)
    sha = embedded.sha256_of(staged)
    lora.adapters_dir().mkdir(parents=True, exist_ok=True)
    staged.rename(lora.adapter_path(sha))
    return base, embedded.sha256_of(base), sha, pairs


def tensors(path):
    return {t.name: t for t in gguf.GGUFReader(str(path)).tensors}


def expected(base_tensor, a, b):
    weight = gguf.quants.dequantize(base_tensor.data, base_tensor.tensor_type)
    return weight + ALPHA / RANK * (b @ a)


def test_the_merged_weights_are_the_base_plus_alpha_over_r_times_b_a(pair, tmp_path):
    base, _, sha, pairs = pair
    out = tmp_path / "merged-f16.gguf"
    merge.write_merged(base, lora.adapter_path(sha), out)
    before, after = tensors(base), tensors(out)
    for name, (a, b) in pairs.items():
        want = expected(before[name], a, b)
        got = np.asarray(after[name].data, dtype=np.float32)
        assert got.shape == want.shape
        assert after[name].tensor_type == gguf.GGMLQuantizationType.F16
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
        # the delta is there (not just the base): orientation B @ A, not (A.T @ B.T).T mixed up
        assert np.abs(want - gguf.quants.dequantize(before[name].data, 8)).max() > 0.1


def test_the_cached_file_keeps_every_key_untouched_tensor_and_merged_type(pair):
    base, base_sha, sha, pairs = pair
    path = merge.merged_model(base, sha)
    before, after = tensors(base), tensors(path)
    assert set(after) == set(before)
    for name, tensor in before.items():
        assert after[name].tensor_type == tensor.tensor_type, name
        if name not in pairs:
            assert after[name].data.tobytes() == tensor.data.tobytes(), name
    for name, (a, b) in pairs.items():
        want = expected(before[name], a, b)
        got = gguf.quants.dequantize(after[name].data, after[name].tensor_type)
        scale = np.abs(want).max()
        np.testing.assert_allclose(got, want, atol=scale / 100)  # Q8_0: 1/127 of a block's max
        assert after[name].data.tobytes() != before[name].data.tobytes()
    fields = gguf.GGUFReader(str(path)).fields
    assert fields["netcast.test"].contents() == "tiny"
    assert fields["general.file_type"].contents() == gguf.LlamaFileType.MOSTLY_Q8_0
    assert fields["qwen2.embedding_length"].contents() == 64


def test_the_file_is_named_by_both_hashes_and_built_once(pair, monkeypatch):
    base, base_sha, sha, _ = pair
    path = merge.merged_model(base, sha)
    assert path == merge.merged_path(base_sha, sha)
    assert path.name == f"{base_sha}-{sha}.gguf" and path.parent.name == "merged"
    mtime = path.stat().st_mtime_ns
    monkeypatch.setattr(merge, "_build", lambda *a: pytest.fail("built again"))
    assert merge.merged_model(base, sha, base_sha) == path
    assert path.stat().st_mtime_ns == mtime
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_damaged_cached_file_is_built_again(pair):
    base, _, sha, _ = pair
    path = merge.merged_model(base, sha)
    good = path.read_bytes()
    with path.open("r+b") as handle:
        handle.seek(len(good) - 10)
        handle.write(b"\xff" * 10)
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    assert merge.merged_model(base, sha).read_bytes() == good


def temporaries(path):
    return sorted(p.name for p in path.parent.iterdir() if p.name.endswith(".tmp"))


KILLED = """
import os, sys
from pathlib import Path
from netcast.models import merge

def killed(source, out, *args):  # the process dies in the quantize step: no cleanup runs
    out.write_bytes(b"half a model")
    os._exit(9)

merge.quantize = killed
merge.merged_model(Path(sys.argv[1]), sys.argv[2])
"""


def test_a_failed_or_killed_build_leaves_no_file_and_the_next_build_clears_its_debris(
    pair, monkeypatch
):
    import subprocess
    import sys

    base, base_sha, sha, _ = pair
    path = merge.merged_path(base_sha, sha)

    def fails(source, out, *args):
        out.write_bytes(b"half a model")
        raise RuntimeError("quantizer crashed")

    with monkeypatch.context() as patched:  # an error in the quantize step: all removed at once
        patched.setattr(merge, "quantize", fails)
        with pytest.raises(RuntimeError, match="quantizer crashed"):
            merge.merged_model(base, sha)
    assert not path.exists() and not temporaries(path)
    # a process killed in the quantize step cleans nothing up: the next build does
    died = subprocess.run([sys.executable, "-c", KILLED, str(base), sha], check=False)
    assert died.returncode == 9
    left = temporaries(path)
    assert not path.exists() and len(left) == 2  # the F16 intermediate and the partial file
    other = path.with_name(f".{'0' * 64}-{sha}.gguf.f16.1.tmp")  # another key's: not this build's
    other.write_bytes(b"building")
    assert merge.merged_model(base, sha) == path
    assert temporaries(path) == [other.name]
    assert merge._intact(path)


@pytest.mark.parametrize(
    ("targets", "match"),
    [
        ({"blk.7.attn_q.weight": (64, 64)}, "adapts blk.7.attn_q.weight, which base.gguf"),
        ({"blk.0.attn_q.weight": (896, 896)}, "do not fit the base's 64 x 64"),
    ],
)
def test_an_adapter_of_another_model_is_refused_in_one_line(pair, tmp_path, targets, match):
    base, _, _, _ = pair
    staged = tmp_path / "other.gguf"
    tiny_gguf_adapter(staged, targets)
    sha = embedded.sha256_of(staged)
    staged.rename(lora.adapter_path(sha))
    with pytest.raises(merge.ModelFileError, match=match) as err:
        merge.merged_model(base, sha)
    assert "\n" not in str(err.value)
    assert not merge.merged_path(embedded.sha256_of(base), sha).exists()


def test_merged_model_of_names_the_store_adapter_and_the_verified_base(pair):
    base, base_sha, sha, _ = pair
    assert merge.merged_model_of(base, lora.adapter_path(sha)) == merge.merged_path(base_sha, sha)
    st = base.stat()
    marker = base.with_name(base.name + ".verified")
    marker.write_text(f"{'c' * 64}:{st.st_size}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}")
    assert merge.merged_model_of(base, lora.adapter_path(sha)).name == f"{'c' * 64}-{sha}.gguf"


# -- the engine: a tuned model served from the merged file ---------------------------------------


class FakeLlama:
    loads: ClassVar[list[dict]] = []

    def __init__(self, **kwargs):
        FakeLlama.loads.append(kwargs)


@pytest.mark.parametrize("merge_adapter", [True, False])
def test_a_tuned_engine_loads_the_merged_file_alone_when_merging(monkeypatch, merge_adapter):
    import llama_cpp

    from netcast.models.factory import make_lm
    from netcast.models.llama import LlamaCppEngine

    asked = []

    def merged_model_of(base, adapter):
        asked.append((base, adapter))
        return "/models/merged/x-y.gguf"

    monkeypatch.setattr(merge, "merged_model_of", merged_model_of)
    monkeypatch.setattr(llama_cpp, "Llama", FakeLlama)
    FakeLlama.loads = []
    lm = make_lm("embedded", merge_adapter=merge_adapter)
    state = {**lm.engine.dump_state(), "lora_path": "/adapters/a.gguf"}
    engine = LlamaCppEngine.load_state(state)  # what attach does for a tuned model id
    assert engine.merge_lora is merge_adapter
    engine._model()
    (load,) = FakeLlama.loads
    if merge_adapter:
        assert asked == [(lm.engine.model_path, "/adapters/a.gguf")]
        assert (load["model_path"], load["lora_path"]) == ("/models/merged/x-y.gguf", None)
    else:
        assert not asked
        assert (load["model_path"], load["lora_path"]) == (lm.engine.model_path, "/adapters/a.gguf")


def test_merging_is_a_setting_of_make_lm_off_by_default():
    from netcast.models.factory import make_lm

    assert make_lm("embedded").engine.merge_lora is False
    assert make_lm("embedded", merge_adapter=True).engine.merge_lora is True
    assert "merge_adapter" not in make_lm("openai/gpt-4o-mini", merge_adapter=False).kwargs
    with pytest.raises(InputError, match="^merge_adapter=True: .* runs on a server"):
        make_lm("openai/gpt-4o-mini", merge_adapter=True)  # no netcast adapter there
