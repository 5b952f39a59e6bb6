"""``netcast runtime`` and ``netcast export-adapter`` (netcast/cli/serving.py), without a model."""

from typer.testing import CliRunner

from netcast.cli.app import app

runner = CliRunner()


def test_runtime_prints_the_backend_why_each_probe_and_the_speed(monkeypatch):
    from netcast.models import backends

    info = {
        "llama_cpp_python": "0.3.36",
        "cpu": "Intel(R) Xeon(R) Processor",
        "cpu_flags": ["amx_tile", "avx512f"],
        "verdict": backends.Verdict(
            "zen4",
            "/venv/bin/libggml-cpu-zen4.so",
            "sapphirerapids died on this machine (SIGILL)",
            [
                backends.Probe("sapphirerapids", False, "SIGILL"),
                backends.Probe("zen4", True, "", 185.0, 26.0, "CPU : AVX512 = 1 |"),
            ],
            fallback=True,
            when="2026-12-02",
        ).to_json(),
        "threads": 2,
        "model": "/models/qwen.gguf",
        "measured": {
            **backends.Probe("zen4", True, "", 177.0, 25.0, "CPU : AVX512 = 1 |").__dict__
        },
        "seconds": 3.4,
    }
    monkeypatch.setattr(backends, "runtime", lambda model, directory, refresh: info)
    result = runner.invoke(app, ["runtime"])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "CPU backend zen4 /venv/bin/libggml-cpu-zen4.so" in out
    assert "why sapphirerapids died on this machine (SIGILL) (tried 2026-12-02)" in out
    assert "sapphirerapids dies: SIGILL" in out and "zen4 runs: prompts 185 tokens/s" in out
    assert "threads 2" in out and "prompts 177 tokens/s, generation 25 tokens/s" in out
    result = runner.invoke(app, ["runtime", "--json"])
    assert '"variant": "zen4"' in result.output


def test_export_adapter_refuses_what_it_cannot_export_in_one_line(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    result = runner.invoke(app, ["export-adapter", str(plain), str(tmp_path / "out")])
    assert result.exit_code == 2 and "lora.gguf: not found" in result.output
    assert len(result.output.strip().splitlines()) == 1

    (plain / "lora.gguf").write_bytes(b"not a gguf file")
    result = runner.invoke(app, ["export-adapter", str(plain), str(tmp_path / "out")])
    assert result.exit_code == 2 and "not a readable GGUF LoRA adapter" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
