"""What serves the models (registered by ``netcast.cli.app``): ``netcast runtime``, what runs
the embedded models on this machine, for a bug report (llama-cpp-python's version, the CPU,
llama.cpp's CPU backend variant in use and why, ``netcast.models.backends``, the threads, and
the prompt and generation speed measured now, in a few seconds); ``netcast export-adapter``, a
tuned artifact's adapter as a peft folder for GPU servers (vLLM's ``--enable-lora``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from netcast.errors import InputError
from netcast.render import console, print_table


def runtime(
    model: Annotated[str, typer.Option(help="the embedded model to measure")] = "embedded",
    reprobe: Annotated[
        bool, typer.Option("--reprobe", help="try every CPU backend variant again")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """What runs the embedded models here: llama.cpp, its CPU backend and its speed."""
    from netcast.models import embedded
    from netcast.models.backends import runtime as describe
    from netcast.models.native import backend_dir

    info = describe(embedded.model_path(embedded.spec(model).name), backend_dir(), reprobe)
    if as_json:
        console.print_json(json.dumps(info))
        return
    print_table(runtime_table(info))


def runtime_table(info: dict) -> Table:
    verdict, now = info["verdict"], info["measured"]
    table = Table(show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("llama-cpp-python", info["llama_cpp_python"])
    table.add_row("CPU", f"{info['cpu']} ({' '.join(info['cpu_flags'])})")
    table.add_row("CPU backend", f"{verdict['variant']} {verdict['path']}".strip())
    table.add_row(
        "why", verdict["reason"] + (f" (tried {verdict['when']})" if verdict["when"] else "")
    )
    for probe in verdict["probes"]:
        ran = (
            f"runs: prompts {probe['prompt_tokens_per_s']:.0f} tokens/s, generation "
            f"{probe['generated_tokens_per_s']:.0f} tokens/s"
            if probe["ok"]
            else f"dies: {probe['died']}"
        )
        table.add_row(f"  {probe['variant']}", ran)
    table.add_row("threads", str(info["threads"]))
    table.add_row("model", info["model"])
    if now["ok"]:
        speed = (
            f"prompts {now['prompt_tokens_per_s']:.0f} tokens/s, generation "
            f"{now['generated_tokens_per_s']:.0f} tokens/s (measured now in {info['seconds']} s)"
        )
    else:
        speed = f"the measurement died: {now['died']}"
    table.add_row("speed", speed)
    table.add_row("llama.cpp features", now["features"] or "-")
    return table


def export_adapter(
    directory: Annotated[
        Path,
        typer.Argument(help="a tuned artifact (it holds lora.gguf), or one of its .gguf adapters"),
    ],
    out: Annotated[Path, typer.Argument(help="the peft adapter folder to write")],
) -> None:
    """A tuned artifact's adapter as a peft folder (adapter_config.json and
    adapter_model.safetensors, the same numbers) for vLLM, peft or transformers. An artifact
    with an adapter per step (lora-<step>.gguf): give the step's file."""
    from netcast.models.lora import write_peft_adapter

    adapter = directory if directory.suffix == ".gguf" else directory / "lora.gguf"
    if not adapter.exists():
        steps = sorted(p.name for p in directory.glob("lora-*.gguf")) if directory.is_dir() else []
        if steps:
            raise InputError(
                f"{directory}: one adapter per step ({', '.join(steps)}); give one of them, "
                f"e.g. {directory / steps[0]}"
            )
        raise InputError(f"{adapter}: not found ({directory} is not a tuned artifact)")
    config = write_peft_adapter(adapter, out)
    base = config["base_model_name_or_path"] or "the base model"
    console.print(
        f"{out}: peft adapter (rank {config['r']}, alpha {config['lora_alpha']:g}, "
        f"{len(config['target_modules'])} modules) over {base}; serve it with: vllm serve "
        f"{base} --enable-lora --lora-modules tuned={out}",
        soft_wrap=True,
        markup=False,
    )
