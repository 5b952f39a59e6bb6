"""Choosing llama.cpp's CPU backend variant (netcast.models.backends), with no model: the
probe's child process is a small script that dies with a real SIGILL for the variant a fake
machine cannot execute, as the AMX variant dies on some virtual machines."""

import json
import sys

import pytest

from netcast.errors import ModelSetupError
from netcast.models import backends

# the probe's child: dies of SIGILL for a library whose name says "sapphirerapids", else
# prints the JSON line a real probe prints (AMX in the features of "amxfast"/"amxslow")
CHILD = r"""
import json, os, signal, sys
library = os.path.basename(sys.argv[1])
if "sapphirerapids" in library:
    os.kill(os.getpid(), signal.SIGILL)
if "killed" in library:
    os.kill(os.getpid(), signal.SIGKILL)
if "broken" in library:
    sys.exit("the model file did not load")
speed = {"amxfast": 400.0, "amxslow": 100.0}.get(library[len("libggml-cpu-"):-3], 200.0)
amx = "AMX_INT8 = 1 | " if "amx" in library else ""
print(json.dumps({"prompt_tokens_per_s": speed, "generated_tokens_per_s": 40.0,
                  "features": "CPU : AVX512 = 1 | " + amx}))
"""
SCORES = {
    "sapphirerapids": 10,
    "killed": 10,
    "broken": 10,
    "zen4": 9,
    "amxfast": 8,
    "amxslow": 8,
    "haswell": 5,
    "x64": 1,
}


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A build's variant folder, a probe child script, netcast's home, the probes counted."""
    monkeypatch.setenv("NETCAST_RUNTIME_DIR", str(tmp_path / "runtime"))
    monkeypatch.delenv(backends.ENV, raising=False)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    monkeypatch.setattr(backends, "CHILD", [sys.executable, str(script)])
    folder = tmp_path / "bin"
    folder.mkdir()
    probed = []

    def add(*names):
        for name in names:
            (folder / f"libggml-cpu-{name}.so").write_bytes(name.encode())

    def run(variant, model):
        probed.append(variant.name)
        return backends.probe(variant, model)

    def verdict(**kwargs):
        return backends.verdict(
            folder,
            lambda: tmp_path / "model.gguf",
            run=run,
            score=lambda path: SCORES[backends.variant_name(path)],
            **kwargs,
        )

    return add, verdict, probed


def test_a_variant_that_dies_with_sigill_falls_back_to_the_next_in_one_line(machine):
    add, verdict, probed = machine
    add("sapphirerapids", "zen4", "haswell")
    said = []
    chosen = verdict(say=said.append)
    assert chosen.variant == "zen4" and chosen.path.endswith("libggml-cpu-zen4.so")
    assert probed == ["sapphirerapids", "zen4"]  # stops at the first that runs (no AMX)
    assert [p.died for p in chosen.probes] == ["SIGILL", ""]
    assert chosen.fallback
    assert said == [
        "netcast: llama.cpp's CPU backend sapphirerapids (SIGILL) dies on this machine; "
        "using zen4 instead (netcast runtime tells more)"
    ]
    # the verdict is kept: a later run probes nothing and says nothing
    said.clear()
    assert verdict(say=said.append).variant == "zen4"
    assert probed == ["sapphirerapids", "zen4"] and said == []


def test_the_one_line_goes_to_stderr_by_default(machine, capsys):
    add, verdict, _ = machine
    add("sapphirerapids", "zen4")
    verdict()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sapphirerapids (SIGILL)" in err and "using zen4" in err


def test_the_best_variant_that_runs_is_kept_silently(machine):
    add, verdict, probed = machine
    add("zen4", "haswell", "x64")
    said = []
    chosen = verdict(say=said.append)
    assert chosen.variant == "zen4" and probed == ["zen4"] and not chosen.fallback
    assert said == [] and "best-scoring" in chosen.reason


@pytest.mark.parametrize(
    "names, kept", [(("amxfast", "haswell"), "amxfast"), (("amxslow", "haswell"), "haswell")]
)
def test_an_amx_variant_is_kept_only_where_it_is_faster(machine, names, kept):
    add, verdict, probed = machine
    add(*names)
    chosen = verdict()
    assert probed == list(names)  # the AMX one and the next, both measured
    assert chosen.variant == kept and "ran prompts faster here" in chosen.reason


@pytest.mark.parametrize(
    "failing, died", [("killed", "SIGKILL"), ("broken", "exit 1: the model file did not load")]
)
def test_a_check_that_fails_for_another_reason_than_the_cpu_is_not_kept(machine, failing, died):
    """Only an illegal instruction passes over a variant: a probe killed (out of memory, an
    interrupt), timed out or failing to load the model says nothing of the CPU, so its variant
    is used untried, nothing is said, and nothing is kept (the next run checks again)."""
    add, verdict, probed = machine
    add(failing, "zen4")
    said = []
    chosen = verdict(say=said.append)
    assert chosen.variant == failing and not chosen.settled and not chosen.fallback
    assert chosen.probes[0].died == died and said == [] and probed == [failing]
    verdict(say=said.append)
    assert probed == [failing, failing]


def test_a_rebuilt_library_is_probed_again(machine, tmp_path):
    add, verdict, probed = machine
    add("sapphirerapids", "zen4")
    verdict(say=lambda line: None)
    (tmp_path / "bin" / "libggml-cpu-zen4.so").write_bytes(b"another build")
    verdict(say=lambda line: None)
    assert probed == ["sapphirerapids", "zen4"] * 2


def test_no_variant_that_runs_is_one_line(machine):
    add, verdict, _ = machine
    add("sapphirerapids")
    with pytest.raises(ModelSetupError) as err:
        verdict()
    assert "\n" not in str(err.value)
    assert "sapphirerapids: SIGILL" in str(err.value) and "GGML_NATIVE=OFF" in str(err.value)


def test_a_pinned_variant_is_used_untried_and_an_unknown_one_refused(machine, monkeypatch):
    add, verdict, probed = machine
    add("sapphirerapids", "zen4", "haswell")
    monkeypatch.setenv(backends.ENV, "haswell")
    assert verdict().variant == "haswell" and probed == []
    monkeypatch.setenv(backends.ENV, "zen5")
    with pytest.raises(ModelSetupError, match="zen5: no such CPU backend"):
        verdict()


@pytest.mark.parametrize(
    "code, out, err, died",
    [
        (-4, "", "", "SIGILL"),
        (-11, "", "", "SIGSEGV"),
        (1, "", "Traceback\nValueError: bad model\n", "exit 1: ValueError: bad model"),
        (0, "not json", "", "exit 0: no output"),
    ],
)
def test_a_probe_that_dies_says_how(code, out, err, died):
    probe = backends.probe_result("zen4", code, out, err)
    assert not probe.ok and probe.died == died


def test_a_probe_that_runs_reads_its_line():
    line = json.dumps(
        {"prompt_tokens_per_s": 210.0, "generated_tokens_per_s": 45.0, "features": "AMX_INT8 = 1"}
    )
    probe = backends.probe_result("sapphirerapids", 0, "llama log\n" + line + "\n", "")
    assert probe.ok and probe.prompt_tokens_per_s == 210.0 and probe.amx
