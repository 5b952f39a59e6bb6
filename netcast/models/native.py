"""llama.cpp's native library as this process loads it: its CPU backends registered
(``load_cpu_backends``) and its stderr lines held back (``quiet_native_stderr``). Every module
that loads a model file with llama.cpp (the engine, the adapter reader, the merged-model
builder, training's check, the server) calls these, and imports no other model module."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import llama_cpp


@contextlib.contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """The process's stderr (file descriptor 2) silenced: llama.cpp logs a line per adapted
    tensor when it loads an adapter ("cannot use buft 'CPU_REPACK', fallback to CPU"), which
    ``verbose=False`` does not hold back. A failed load still raises."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def backend_dir() -> Path:
    """Where pip put a runtime-dispatch build's CPU backend variants: ``site-packages/bin``."""
    return Path(llama_cpp.__file__).parent.parent / "bin"


_loading = threading.Lock()  # two engines loading at once register the backend once


def load_cpu_backends() -> int:
    """Register llama.cpp's CPU backend where the build left that to the caller, and return how
    many backends are registered.

    A llama.cpp built with runtime CPU dispatch (``GGML_BACKEND_DL`` with
    ``GGML_CPU_ALL_VARIANTS``: one CPU backend library per x86 level) registers none by itself,
    and llama-cpp-python 0.3.36 loads none, so every model load fails ("no backends are
    loaded"). The variant this machine runs (``netcast.models.backends.verdict``: the
    best-scoring one that does not die here, tried once per machine and build) is loaded from
    ``site-packages/bin`` into the copy of libggml that libllama links against
    (``libggml.so.0``: the wheel's ``libggml.so`` is a separate copy with a registry of its
    own). A build with the CPU backend linked in has one already: nothing is done."""
    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    ggml = ctypes.CDLL(str(lib_dir / "libggml.so.0"))
    ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    variants = backend_dir()
    with _loading:
        if ggml.ggml_backend_reg_count() == 0 and any(variants.glob("libggml-cpu-*.so")):
            _load_chosen(ggml, variants)
    return int(ggml.ggml_backend_reg_count())


def _load_chosen(ggml, variants: Path) -> None:
    """Load the CPU backend variant this machine runs (``backends.verdict``) from ``variants``."""
    from netcast.models import embedded
    from netcast.models.backends import verdict

    chosen = verdict(variants, embedded.model_path)
    # llama.cpp writes "load_backend: loaded CPU backend from ..." to the process's stderr: not
    # under every command's output (a failure shows in the count load_cpu_backends returns)
    ggml.ggml_backend_load.restype = ctypes.c_void_p
    with quiet_native_stderr():
        ggml.ggml_backend_load(chosen.path.encode())
