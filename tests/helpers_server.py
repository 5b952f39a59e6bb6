"""A real OpenAI-compatible model server for tests: llama-cpp-python's ``llama_cpp.server`` (the
``server`` extra, started as ``netcast.models.serve``) serving the embedded GGUF on a free
loopback port.

One process serves the same file under three names, four with ``lora`` (a config file; it keeps
one model loaded and reloads on a name change, about a second for the 0.5B model):

- ``netcast-small``: the GGUF's own chat template, as ``python -m llama_cpp.server --model
  FILE --model_alias netcast-small`` serves it;
- ``netcast-judge``: the same, under a second name (the judge);
- ``netcast-prefill``: a ChatML template that leaves a final assistant message open, so that the
  reply continues it (what llama.cpp's own server and vLLM's ``continue_final_message`` do; the
  GGUF template closes every message and opens a new reply). Identical prompts otherwise;
- ``netcast-tuned``: given ``lora`` (a GGUF LoRA adapter), the model with it applied, as
  ``--lora_path`` serves it.

The server's access log is read by a thread: ``completions`` counts the model calls answered
(``settled()`` reads it once the log is quiet), and ``kill_after(n)`` kills the server (SIGKILL,
as a crash) once ``n`` more have been answered.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

SMALL, JUDGE, PREFILL = "netcast-small", "netcast-judge", "netcast-prefill"
TUNED = "netcast-tuned"  # the model with a LoRA adapter, where the server is given one

# ChatML as Qwen2.5's template renders it without tools, except that a final assistant message
# (the caller's prefill) is left open. llama-cpp-python's "hf-tokenizer-config" formatter
# appends an empty assistant message to every request as the generation prompt: it is the one
# left open when the caller sent none.
PREFILL_TEMPLATE = (
    "{%- set turns = messages[:-1] -%}"
    "{%- set prefill = turns|length > 0 and turns[-1].role == 'assistant' -%}"
    "{%- if turns|length == 0 or turns[0].role != 'system' -%}"
    "{{ '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. "
    "You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- for m in turns -%}"
    "{%- if prefill and loop.last -%}"
    "{{ '<|im_start|>assistant\\n' + m.content }}"
    "{%- else -%}"
    "{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if not prefill -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """``start()`` (waits until ``/v1/models`` answers), ``stop()``, ``kill()``, ``base``."""

    def __init__(
        self, model_path: str | Path, workdir: Path, n_ctx: int = 4096, lora: Path | None = None
    ):
        self.model_path = str(model_path)
        self.lora = lora
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.n_ctx = n_ctx
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.completions = 0  # model calls answered (chat and text completions), all starts
        self._kill_at: int | None = None
        self._lock = threading.Lock()
        # held from a kill's signal until the process is reaped: ``Popen.poll`` answers None while
        # another thread waits on the process, so ``start`` would take a dying server for alive
        self._life = threading.Lock()
        self.log_path = self.workdir / "server.log"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def config(self) -> Path:
        tokenizer_config = self.workdir / "prefill_tokenizer_config.json"
        tokenizer_config.write_text(
            json.dumps(
                {
                    "chat_template": PREFILL_TEMPLATE,
                    "bos_token": "<|endoftext|>",
                    "eos_token": "<|im_end|>",
                }
            )
        )
        common = {"model": self.model_path, "n_ctx": self.n_ctx, "n_threads": 2}
        common |= {"n_threads_batch": 2, "verbose": False}
        path = self.workdir / "server.json"
        path.write_text(
            json.dumps(
                {
                    "host": "127.0.0.1",
                    "port": self.port,
                    "models": [
                        {**common, "model_alias": SMALL},
                        {**common, "model_alias": JUDGE},
                        {
                            **common,
                            "model_alias": PREFILL,
                            "chat_format": "hf-tokenizer-config",
                            "hf_tokenizer_config_path": str(tokenizer_config),
                        },
                        *(
                            [{**common, "model_alias": TUNED, "lora_path": str(self.lora)}]
                            if self.lora
                            else []
                        ),
                    ],
                },
                indent=2,
            )
        )
        return path

    def command(self) -> list[str]:
        # netcast.models.serve: llama_cpp.server with the CPU backend of a runtime-dispatch
        # build loaded first
        return [sys.executable, "-m", "netcast.models.serve", "--config_file", str(self.config())]

    def start(self, timeout: float = 180.0) -> LlamaServer:
        with self._life:
            if self.process is not None and self.process.poll() is None:
                return self
        log = self.log_path.open("a", encoding="utf-8")
        self.process = subprocess.Popen(
            self.command(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        threading.Thread(target=self._read, args=(self.process, log), daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the model server exited; see {self.log_path}")
            try:
                with urllib.request.urlopen(f"{self.base}/models", timeout=5) as reply:
                    if reply.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the model server was not ready in {timeout:.0f} s; {self.log_path}")

    def _read(self, process: subprocess.Popen, log) -> None:
        for line in process.stdout:
            log.write(line)
            log.flush()
            if "POST /v1/" in line and "completions" in line:
                with self._lock:
                    self.completions += 1
                    if self._kill_at is not None and self.completions >= self._kill_at:
                        self._kill_at = None
                        # the access line comes as the reply starts: let its body go out
                        threading.Timer(0.5, self.kill, args=(process,)).start()
        log.close()

    def settled(self, quiet: float = 1.5, timeout: float = 30.0) -> int:
        """``completions`` once the access log has been quiet for ``quiet`` seconds.

        The log is read by a thread and a reply's access line can come after the client has its
        reply: reading ``completions`` at once may miss the last calls.
        """
        deadline = time.monotonic() + timeout
        last, since = self.completions, time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.1)
            if self.completions != last:
                last, since = self.completions, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
        return self.completions

    def kill_after(self, n: int) -> None:
        """Kill the server (SIGKILL) once it has answered ``n`` more model calls."""
        with self._lock:
            self._kill_at = self.completions + n

    def kill(self, process: subprocess.Popen | None = None) -> None:
        """SIGKILL ``process`` (the running one by default) and reap it."""
        with self._life:
            process = process or self.process
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
