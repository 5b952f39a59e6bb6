"""llama-cpp-python's OpenAI-compatible server with llama.cpp's CPU backend loaded first.

    python -m netcast.models.serve --model FILE.gguf --model_alias NAME   # as llama_cpp.server

The same arguments as ``python -m llama_cpp.server`` (the ``server`` extra). A llama.cpp built
with runtime CPU dispatch, as the quick start's install builds it, registers no backend by
itself and llama_cpp.server loads none (``netcast.models.llama.load_cpu_backends``); with any
other build this runs exactly as ``llama_cpp.server``.
"""

from __future__ import annotations

import runpy

from netcast.models.native import load_cpu_backends


def main() -> None:
    load_cpu_backends()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
