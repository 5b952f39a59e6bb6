"""A tuned model as one GGUF file: the base with its LoRA adapter merged in, so it runs at the
base model's speed (llama.cpp applying an adapter at run time adds two small matrix products to
every adapted layer).

``merged_model(base_path, adapter_sha256)`` builds it once per (base, adapter) pair and keeps it
by content: ``<models dir>/merged/<base sha256>-<adapter sha256>.gguf``. The build reads the base
with the ``gguf`` package, dequantizes each weight the adapter touches, adds ``alpha / r * B @ A``
(what llama.cpp adds at run time), writes every other tensor's bytes and every metadata key
unchanged into an F16 intermediate, then has llama.cpp quantize that file to the base's file type
with each tensor pinned to the type it has in the base: untouched tensors are copied byte for
byte, merged ones are quantized again to their own type. A sidecar ``.sha256`` holds the built
file's hash; a cached file that no longer matches it is built again. Every file is written under
a temporary name in the cache directory and renamed into place; what a killed build left there
is removed by the next one of the same key."""

from __future__ import annotations

import ctypes
import glob
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from netcast import settings
from netcast.errors import ModelFileError
from netcast.files import key_lock
from netcast.models import embedded, lora

log = logging.getLogger(__name__)
_SHA256 = re.compile(r"[0-9a-f]{64}")


def merged_dir() -> Path:
    return settings.models_dir() / "merged"


def merged_path(base_sha256: str, adapter_sha256: str) -> Path:
    """Where the merge of adapter ``adapter_sha256`` into base ``base_sha256`` is kept."""
    return merged_dir() / f"{base_sha256}-{adapter_sha256}.gguf"


def merged_model(base_path: Path, adapter_sha256: str, base_sha256: str | None = None) -> Path:
    """The path of base GGUF ``base_path`` with the stored adapter ``adapter_sha256`` merged into
    its weights, built on first use (under a lock per key, written to a temporary file and
    renamed) and reused after. ``base_sha256``: the base file's hash when the caller knows it
    (an embedded model's spec); otherwise it is read from the base's verification marker or
    computed. A cached file whose hash no longer matches the one recorded at build time is
    built again."""
    base_path = Path(base_path)
    base_sha = base_sha256 or _base_sha256(base_path)
    return _merged(base_path, lora.adapter_path(adapter_sha256), base_sha, adapter_sha256)


def merged_model_of(base_path: str | Path, adapter_path: str | Path) -> Path:
    """``merged_model`` for an adapter file (named by its sha256 in the adapter store; any other
    file is hashed)."""
    adapter_path = Path(adapter_path)
    sha = adapter_path.stem
    if not _SHA256.fullmatch(sha):
        sha = embedded.sha256_of(adapter_path)
    base_path = Path(base_path)
    return _merged(base_path, adapter_path, _base_sha256(base_path), sha)


def _base_sha256(base_path: Path) -> str:
    """The base's sha256 as its verification marker (``embedded.model_path``) holds it when the
    file is unchanged since, else computed."""
    marker = base_path.with_name(base_path.name + ".verified")
    if marker.exists():
        sha, _, stamp = marker.read_text().partition(":")
        st = base_path.stat()
        if stamp == f"{st.st_size}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}":
            return sha
    return embedded.sha256_of(base_path)


def _merged(base_path: Path, adapter_path: Path, base_sha: str, adapter_sha: str) -> Path:
    target = merged_path(base_sha, adapter_sha)
    target.parent.mkdir(parents=True, exist_ok=True)
    with key_lock(target):
        _remove_stale(target)
        if _intact(target):
            return target
        if target.exists():
            log.warning("%s: damaged (its sha256 is not the one recorded); rebuilding", target)
        else:
            log.info("merging adapter %s... into %s (once)", adapter_sha[:12], base_path.name)
        _build(base_path, adapter_path, target)
    return target


def _sidecar(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _temporary(target: Path, kind: str) -> Path:
    """This process's temporary file for ``target`` (``kind``: what it holds), beside it."""
    return target.with_name(f".{target.name}.{kind}.{os.getpid()}.tmp")


def _remove_stale(target: Path) -> None:
    """Remove the temporary files of ``target`` that a killed build left (the caller holds the
    key's lock, so no build of it is running): an F16 intermediate is larger than the model."""
    for stale in target.parent.glob(f".{glob.escape(target.name)}.*.tmp"):
        log.info("%s: removing what an interrupted build left", stale)
        stale.unlink(missing_ok=True)


def _write_sidecar(target: Path, sha: str) -> None:
    tmp = _temporary(target, "sha256")
    tmp.write_text(f"{sha} {_stamp(target)}\n")
    tmp.replace(_sidecar(target))


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _intact(target: Path) -> bool:
    """``target`` exists and has the sha256 recorded when it was built (hashed again only when
    its size, inode or times changed since the last check)."""
    sidecar = _sidecar(target)
    if not target.exists() or not sidecar.exists():
        return False
    sha, _, stamp = sidecar.read_text().strip().partition(" ")
    if stamp == _stamp(target):
        return True
    if embedded.sha256_of(target) != sha:
        return False
    _write_sidecar(target, sha)
    return True


def _build(base_path: Path, adapter_path: Path, target: Path) -> None:
    """Build ``target`` through temporary files beside it (removed on any error; a killed
    build's are removed by the next build, ``_remove_stale``), renamed into place."""
    unquantized = _temporary(target, "f16")
    quantized = _temporary(target, "gguf")
    try:
        types, file_type = write_merged(base_path, adapter_path, unquantized)
        quantize(unquantized, quantized, file_type, types)
        unquantized.unlink()
        sha = embedded.sha256_of(quantized)
        quantized.replace(target)
        _write_sidecar(target, sha)
    finally:
        unquantized.unlink(missing_ok=True)
        quantized.unlink(missing_ok=True)


def merged_weight(weight, lora_a, lora_b, alpha: float):
    """A base tensor (GGUF reader tensor) plus its LoRA delta as float32, numpy order
    (out, in): llama.cpp computes ``W x + alpha / r * B (A x)`` with ``lora_a`` ne [in, r]
    (numpy (r, in)) and ``lora_b`` ne [r, out] (numpy (out, r)), r = lora_a's ne[1]."""
    import gguf
    import numpy as np

    base = gguf.quants.dequantize(weight.data, weight.tensor_type).astype(np.float32)
    a = np.asarray(lora_a.data, dtype=np.float32)
    b = np.asarray(lora_b.data, dtype=np.float32)
    rank = a.shape[0]
    return base + np.float32(alpha / rank) * (b @ a)


def _copy_fields(reader, writer) -> None:
    import gguf

    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)


def write_merged(base_path: Path, adapter_path: Path, out: Path) -> tuple[dict[str, int], int]:
    """Write the base with the adapter merged in as GGUF ``out``: every metadata key and every
    untouched tensor's bytes as in the base, each adapted weight as F16. Return the base's
    tensor types ({name: GGML type}) and its ``general.file_type``."""
    import gguf
    import numpy as np

    reader = gguf.GGUFReader(str(base_path))
    pairs, alpha = lora.lora_pairs(gguf.GGUFReader(str(adapter_path)))
    names = {t.name for t in reader.tensors}
    unknown = sorted(set(pairs) - names)
    if unknown:
        raise ModelFileError(
            f"{adapter_path}: adapts {unknown[0]}, which {base_path.name} does not have "
            "(an adapter of another model)"
        )
    for tensor in reader.tensors:
        if tensor.name in pairs:
            a, b = (t.data.shape for t in pairs[tensor.name])
            cols, rows = int(tensor.shape[0]), int(tensor.shape[1])
            if len(a) != 2 or a[1] != cols or b != (rows, a[0]):
                raise ModelFileError(
                    f"{adapter_path}: {tensor.name}.lora_a/lora_b have shapes {a}/{b}, which do "
                    f"not fit the base's {rows} x {cols} (an adapter of another model)"
                )
    arch = str(reader.fields[gguf.Keys.General.ARCHITECTURE].contents())
    writer = gguf.GGUFWriter(str(out), arch)
    _copy_fields(reader, writer)
    for tensor in reader.tensors:
        if tensor.name in pairs:
            rows = int(tensor.shape[1]) if len(tensor.shape) > 1 else 1
            shape = (rows, int(tensor.shape[0]))
            writer.add_tensor_info(tensor.name, shape, np.dtype(np.float16), 2 * rows * shape[1])
        else:
            data = tensor.data
            writer.add_tensor_info(
                tensor.name, data.shape, data.dtype, data.nbytes, tensor.tensor_type
            )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for data in _tensor_data(reader, pairs, alpha):
        writer.write_tensor_data(data)
    writer.close()
    file_type = reader.fields.get("general.file_type")
    types = {t.name: int(t.tensor_type) for t in reader.tensors}
    return types, int(file_type.contents()) if file_type else 1


def _tensor_data(reader, pairs, alpha) -> Iterator[Any]:
    """Each tensor's data in file order: merged weights as F16, the rest as stored."""
    import numpy as np

    for tensor in reader.tensors:
        if tensor.name in pairs:
            yield merged_weight(tensor, *pairs[tensor.name], alpha).astype(np.float16)
        else:
            yield tensor.data


def quantize(source: Path, out: Path, file_type: int, types: dict[str, int]) -> None:
    """llama.cpp's quantizer on ``source`` -> ``out`` at ``file_type`` with every tensor pinned
    to its type in ``types`` (so tensors already of that type are copied as they are)."""
    import llama_cpp

    from netcast.models.native import load_cpu_backends, quiet_native_stderr

    load_cpu_backends()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = file_type
    params.nthread = os.cpu_count() or 1
    params.allow_requantize = False
    overrides = (llama_cpp.llama_model_tensor_override * (len(types) + 1))()
    keep = []
    for i, (name, kind) in enumerate(sorted(types.items())):
        pattern = ("^" + name.replace(".", r"\.") + "$").encode()
        keep.append(pattern)
        overrides[i].pattern = pattern
        overrides[i].type = kind
    overrides[len(types)].pattern = None
    params.tt_overrides = ctypes.cast(
        overrides, ctypes.POINTER(llama_cpp.llama_model_tensor_override)
    )
    with quiet_native_stderr():
        status = llama_cpp.llama_model_quantize(
            str(source).encode(), str(out).encode(), ctypes.byref(params)
        )
    if status != 0:
        raise ModelFileError(f"{source}: llama.cpp could not quantize the merged model ({status})")
