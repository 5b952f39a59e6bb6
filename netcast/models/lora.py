"""LoRA adapters of the embedded models as llama.cpp reads them: a GGUF file (``general.type``
``adapter``, ``adapter.type`` ``lora``, one ``<base tensor>.lora_a`` / ``.lora_b`` pair per
adapted weight, the tensor names of the base GGUF) with a JSON record beside it.

Adapters are stored by content: ``<netcast home>/adapters/<sha256>.gguf`` and ``<sha256>.json``.
The record holds the adapter file's sha256, the base model's name and sha256, the training
settings, the examples' count and the loss curve; the GGUF carries the base's sha256 too
(``netcast.base_sha256``). A tuned model's id names its base and its adapter:
``netcast/<base model file name>+lora-<sha256>``. ``verified_adapter`` refuses, with one line, an
adapter whose file does not match its record (damaged) or whose base is another model."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from netcast import settings
from netcast.errors import InputError, ModelFileError
from netcast.models import embedded

PREFIX = "netcast/"  # an embedded model's DSPy model id: PREFIX + its file name
_TUNED = re.compile(r"^netcast/(?P<base>[^+]+)\+lora-(?P<sha>[0-9a-f]{64})$")


@dataclass(frozen=True)
class AdapterRecord:
    """What ``<sha256>.json`` holds beside an adapter."""

    sha256: str
    base: str  # the netcast name of the base model ("embedded", "embedded-1.5b")
    base_sha256: str
    size: int
    rank: int
    alpha: float
    settings: dict[str, Any] = field(default_factory=dict)
    examples: int = 0
    loss_curve: list[float] = field(default_factory=list)
    seconds: float = 0.0  # training time (steps only, summed over resumed runs)
    peak_memory: int = 0  # bytes: the highest whole-process peak (ru_maxrss) the training ran in
    longest_tokens: int = 0  # the longest training example
    memory_estimate: int = 0  # bytes: what the memory check expected (finetune.memory_needed)
    gradient_checkpointing: bool = False  # activations recomputed in the backward pass

    def to_json(self) -> dict[str, Any]:
        return {
            "sha256": self.sha256,
            "base": self.base,
            "base_sha256": self.base_sha256,
            "size": self.size,
            "rank": self.rank,
            "alpha": self.alpha,
            "settings": self.settings,
            "examples": self.examples,
            "loss_curve": self.loss_curve,
            "seconds": self.seconds,
            "peak_memory": self.peak_memory,
            "longest_tokens": self.longest_tokens,
            "memory_estimate": self.memory_estimate,
            "gradient_checkpointing": self.gradient_checkpointing,
        }


def require_extra() -> None:
    """One line if the ``finetune`` extra (peft) is not installed: training needs it; serving
    a tuned model does not (its adapter is read with ``gguf``, in the base install)."""
    import importlib.util

    if importlib.util.find_spec("peft") is None:
        raise InputError('peft not installed: finetuning needs pip install "netcast[finetune]"')


def adapters_dir() -> Path:
    return settings.home() / "adapters"


def base_model_id(spec: embedded.ModelSpec) -> str:
    """The DSPy model id of an embedded model (what ``make_lm`` names it)."""
    return PREFIX + spec.model_name


def tuned_model_id(spec: embedded.ModelSpec, sha256: str) -> str:
    """The model id of ``spec`` served with the adapter whose file has ``sha256``: its own id,
    so DSPy's cache never answers it from the base model's replies."""
    return f"{base_model_id(spec)}+lora-{sha256}"


def parse_model_id(model: str) -> tuple[embedded.ModelSpec, str | None]:
    """(the embedded model, the adapter's sha256 or None) a model id names; ``InputError`` for
    an id that names no embedded model (a model served by an API: no weights here)."""
    tuned = _TUNED.match(model)
    base = tuned.group("base") if tuned else model.removeprefix(PREFIX)
    for spec in embedded.MODELS.values():
        if model.startswith(PREFIX) and base == spec.model_name:
            return spec, tuned.group("sha") if tuned else None
        if not tuned and model == spec.name:
            return spec, None
    raise InputError(
        f"{model}: not an embedded model, so there are no weights here to train (a model "
        f"served by an API is tuned by its provider); finetune one of {', '.join(embedded.MODELS)}"
    )


def adapter_path(sha256: str) -> Path:
    return adapters_dir() / f"{sha256}.gguf"


def record_path(sha256: str) -> Path:
    return adapters_dir() / f"{sha256}.json"


def _sha256(path: Path) -> str:
    return embedded.sha256_of(path)


@dataclass(frozen=True)
class BaseShape:
    """What a base GGUF's header says of its transformer (llama.cpp reads it, vocabulary only:
    the gguf package's reader takes about 20 s to parse the 0.5B model's header)."""

    arch: str
    blocks: int
    embedding: int
    feed_forward: int
    heads: int
    kv_heads: int
    vocab: int

    def parameters(self) -> int:
        """Parameters of the model, its token embedding and output matrices counted apart."""
        kv = self.embedding // self.heads * self.kv_heads
        block = (
            2 * self.embedding**2 + 2 * self.embedding * kv + 3 * self.embedding * self.feed_forward
        )
        return self.blocks * block + 2 * self.vocab * self.embedding

    def lora_per_rank(self) -> int:
        """LoRA parameters per unit of rank over the seven projections of every block."""
        kv = self.embedding // self.heads * self.kv_heads
        e, f = self.embedding, self.feed_forward
        return self.blocks * (2 * (e + e) + 2 * (e + kv) + 3 * (e + f))


@lru_cache(maxsize=4)
def base_shape(base_path: Path) -> BaseShape:
    import llama_cpp
    from llama_cpp._internals import LlamaModel

    from netcast.models.native import load_cpu_backends

    load_cpu_backends()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = LlamaModel(path_model=str(base_path), params=params, verbose=False)
    try:
        meta = model.metadata()
        arch = meta["general.architecture"]

        def number(key: str) -> int:
            return int(meta[f"{arch}.{key}"])

        return BaseShape(
            arch=arch,
            blocks=number("block_count"),
            embedding=number("embedding_length"),
            feed_forward=number("feed_forward_length"),
            heads=number("attention.head_count"),
            kv_heads=number("attention.head_count_kv"),
            vocab=int(model.n_vocab()),
        )
    finally:
        model.close()


def _field_str(reader, key: str) -> str:
    value = reader.fields.get(key)
    if value is None:
        raise KeyError(key)
    return str(value.contents())


def lora_tensor_name(peft_name: str, name_map) -> tuple[str, str]:
    """(the base GGUF tensor name, "a" or "b") of a peft LoRA weight's state-dict name, e.g.
    ``base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight`` ->
    ``("blk.3.attn_q.weight", "a")``."""
    hf = peft_name.removeprefix("base_model.model.")
    for part, which in ((".lora_A.weight", "a"), (".lora_B.weight", "b")):
        if hf.endswith(part):
            base = name_map.get_name(hf.removesuffix(part))
            if base is None:
                break
            return base + ".weight", which
    raise ValueError(f"{peft_name}: not a LoRA weight of a layer llama.cpp knows")


def write_adapter(
    weights: dict[str, Any],
    spec: embedded.ModelSpec,
    base_path: Path,
    alpha: float,
    rank: int,
    meta: dict[str, Any],
) -> AdapterRecord:
    """Write peft LoRA ``weights`` (state-dict name -> tensor) of base model ``spec`` as a GGUF
    LoRA in the adapter store (f16 tensors), with its record; return the record. ``meta``:
    ``settings``, ``examples``, ``loss_curve``, ``seconds``."""
    import gguf
    import numpy as np

    shape = base_shape(Path(base_path))
    arch = shape.arch
    arch_id = {name: key for key, name in gguf.MODEL_ARCH_NAMES.items()}[arch]
    name_map = gguf.get_tensor_name_map(arch_id, shape.blocks)
    tensors = {}
    for name, tensor in weights.items():
        base, which = lora_tensor_name(name, name_map)
        array = tensor.detach().float().cpu().numpy() if hasattr(tensor, "detach") else tensor
        tensors[f"{base}.lora_{which}"] = np.ascontiguousarray(array, dtype=np.float16)
    directory = adapters_dir()
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".lora.{os.getpid()}.{id(weights)}.tmp"
    try:
        writer = gguf.GGUFWriter(str(tmp), arch)
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
        writer.add_string("netcast.base", spec.name)
        writer.add_string("netcast.base_sha256", spec.sha256)
        writer.add_string("netcast.settings", json.dumps(meta.get("settings", {}), sort_keys=True))
        writer.add_string("netcast.loss_curve", json.dumps(meta.get("loss_curve", [])))
        for name in sorted(tensors):
            writer.add_tensor(name, tensors[name])
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        sha = _sha256(tmp)
        record = AdapterRecord(
            sha256=sha,
            base=spec.name,
            base_sha256=spec.sha256,
            size=tmp.stat().st_size,
            rank=rank,
            alpha=float(alpha),
            settings=dict(meta.get("settings", {})),
            examples=int(meta.get("examples", 0)),
            loss_curve=[float(x) for x in meta.get("loss_curve", [])],
            seconds=float(meta.get("seconds", 0.0)),
            peak_memory=int(meta.get("peak_memory", 0)),
            longest_tokens=int(meta.get("longest_tokens", 0)),
            memory_estimate=int(meta.get("memory_estimate", 0)),
            gradient_checkpointing=bool(meta.get("gradient_checkpointing", False)),
        )
        tmp.replace(adapter_path(sha))
    finally:
        tmp.unlink(missing_ok=True)
    write_json(record_path(sha), record.to_json())
    return record


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


def read_record(sha256: str) -> AdapterRecord:
    """The record of adapter ``sha256``; one-line ``ModelFileError`` if it is missing or
    unreadable."""
    path = record_path(sha256)
    if not path.exists():
        raise ModelFileError(f"{path}: adapter record not found (no adapter {sha256[:12]}... here)")
    try:
        data = json.loads(path.read_text())
        return AdapterRecord(**data)
    except (ValueError, TypeError) as err:
        raise ModelFileError(f"{path}: not an adapter record ({err})") from None


def verified_adapter(sha256: str, spec: embedded.ModelSpec) -> Path:
    """The path of adapter ``sha256`` after checking it can serve ``spec``: its record names
    ``spec``'s sha256 as its base, the file has the record's size and sha256, and its GGUF header
    is an adapter of that base. Anything else is one ``ModelFileError`` line."""
    path = adapter_path(sha256)
    record = read_record(sha256)
    where = record_path(sha256)
    if record.base_sha256 != spec.sha256:
        raise ModelFileError(
            f"{where}: this adapter was trained on another base model (sha256 "
            f"{record.base_sha256[:12]}..., {record.base}), not on {spec.name} (sha256 "
            f"{spec.sha256[:12]}...); retrain it for {spec.name}"
        )
    if not path.exists():
        raise ModelFileError(f"{path}: adapter file not found (its record is in {where})")
    actual = _sha256(path) if path.stat().st_size == record.size else None
    if actual != sha256 or record.sha256 != sha256:
        raise ModelFileError(
            f"{path}: adapter file damaged (its size or sha256 is not the one its record "
            f"{where.name} holds); train it again"
        )
    header_base = _gguf_base(path)
    if header_base != spec.sha256:
        raise ModelFileError(
            f"{path}: the adapter's header names base sha256 {str(header_base)[:12]}..., not "
            f"{spec.name}'s {spec.sha256[:12]}...; retrain it for {spec.name}"
        )
    return path


def _gguf_base(path: Path) -> str | None:
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
        if _field_str(reader, "general.type") != "adapter":
            raise ValueError("general.type is not 'adapter'")
        return _field_str(reader, "netcast.base_sha256")
    except Exception as err:  # gguf raises ValueError, KeyError, struct errors on a bad file
        raise ModelFileError(f"{path}: not a readable GGUF LoRA adapter ({err})") from None


def _entry_field(entry: Any, *path: str) -> Any:
    value = entry
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


ADAPTER_FILE = re.compile(r"lora(-[A-Za-z0-9_-]+)?\.gguf")  # an adapter's file in an artifact


def adapter_file(step: str | None = None) -> str:
    """The file an artifact holds an adapter in: ``lora.gguf`` for the one its steps share,
    ``lora-<step>.gguf`` for a step's own."""
    return "lora.gguf" if step is None else f"lora-{re.sub(r'[^A-Za-z0-9_]+', '-', step)}.gguf"


def artifact_adapters(entry: dict[str, Any]) -> dict[str | None, dict[str, Any]]:
    """A recipe's ``finetune`` entry by the step each adapter serves: ``{None: entry}`` where
    the steps share one adapter, else each step's own entry (``finetune.steps``)."""
    steps = entry.get("steps") if isinstance(entry, dict) else None
    return dict(steps) if isinstance(steps, dict) else {None: entry}


def serve_artifact_adapter(lm: Any, directory: Path, entry: dict[str, Any]) -> Any:
    """A copy of embedded LM ``lm`` serving an adapter an artifact holds (``lora.gguf``, or
    the file its recipe's ``finetune`` ``entry`` names), after checking, each refused with one
    line: ``lm`` runs the base model the adapter was trained on (its sha256), the file is the
    one the recipe names (its sha256), and its header names that base. The adapter is copied
    into the adapter store (by its sha256), so the tuned model id serves it like one trained
    here."""
    directory = Path(directory)
    name = _entry_field(entry, "adapter", "file") or adapter_file()
    if not isinstance(name, str) or not ADAPTER_FILE.fullmatch(name):
        raise InputError(
            f"{directory / 'recipe.json'}: field 'finetune': adapter.file {name!r} is no "
            "adapter file name (lora.gguf or lora-<step>.gguf)"
        )
    path = directory / name
    sha = _entry_field(entry, "adapter", "sha256")
    base_sha = _entry_field(entry, "base", "sha256")
    base_name = _entry_field(entry, "base", "name") or "?"
    if not isinstance(sha, str) or not isinstance(base_sha, str):
        raise InputError(
            f"{directory / 'recipe.json'}: field 'finetune': the adapter's and its base "
            "model's sha256 (adapter.sha256, base.sha256) are missing"
        )
    model = str(getattr(lm, "model", lm))
    try:
        spec = parse_model_id(model)[0]
    except InputError:
        if served_from(lm):  # a server the user runs with the adapter (session.check_served)
            return lm
        raise InputError(
            f"{directory}: its program runs a LoRA adapter of the embedded model {base_name}; "
            f"{model} cannot serve it (give model={base_name!r}, serve {path.name} on a server "
            f"and give its --api-base, or compile --from {directory} --model {model} to "
            "compile it for that model)"
        ) from None
    if spec.sha256 != base_sha:
        raise ModelFileError(
            f"{path}: adapter trained on base model {base_name} (sha256 {base_sha[:12]}...), "
            f"not on {spec.name} (sha256 {spec.sha256[:12]}...); netcast compile --from "
            f"{directory} --model {spec.name} trains one for it"
        )
    if not path.exists():
        raise InputError(f"{path}: missing (the recipe names adapter {sha[:12]}...)")
    actual = _sha256(path)
    if actual != sha:
        raise ModelFileError(
            f"{path}: adapter file damaged (sha256 {actual[:12]}..., the recipe names "
            f"{sha[:12]}...); compile the artifact again"
        )
    header_base = _gguf_base(path)
    if header_base != base_sha:
        raise ModelFileError(
            f"{path}: the adapter's header names base sha256 {str(header_base)[:12]}..., not "
            f"the recipe's {base_sha[:12]}...; compile the artifact again"
        )
    _install(path, sha, spec, entry)
    return lm.copy(model=tuned_model_id(spec, sha))


def served_from(lm: Any) -> list[str]:
    """The servers (``api_base``, one or several replicas) a DSPy LM calls; [] for an embedded
    model or a provider's API."""
    bases = getattr(getattr(lm, "engine", None), "bases", None)
    if bases:
        return list(bases)
    base = (getattr(lm, "kwargs", None) or {}).get("api_base")
    return [str(base)] if base else []


def _install(path: Path, sha: str, spec: embedded.ModelSpec, entry: dict[str, Any]) -> None:
    """Put a checked adapter file into the store (unless there already, the same size) with
    the record its artifact's ``finetune`` entry describes."""
    import shutil

    stored = adapter_path(sha)
    stored.parent.mkdir(parents=True, exist_ok=True)
    size = path.stat().st_size
    if not stored.exists() or stored.stat().st_size != size:
        tmp = stored.with_name(f".{stored.name}.{os.getpid()}.tmp")
        shutil.copyfile(path, tmp)
        tmp.replace(stored)
    if not record_path(sha).exists():
        record = AdapterRecord(
            sha256=sha,
            base=spec.name,
            base_sha256=spec.sha256,
            size=size,
            rank=int(entry.get("rank") or 0),
            alpha=float(entry.get("alpha") or 0.0),
            settings=dict(entry.get("settings") or {}),
            examples=int(_entry_field(entry, "examples", "count") or 0),
            loss_curve=[float(x) for x in entry.get("loss_curve") or []],
            seconds=float(entry.get("seconds") or 0.0),
            peak_memory=int(entry.get("peak_memory") or 0),
            longest_tokens=int(entry.get("longest_tokens") or 0),
            memory_estimate=int(entry.get("memory_estimate") or 0),
            gradient_checkpointing=bool(entry.get("gradient_checkpointing")),
        )
        write_json(record_path(sha), record.to_json())


def lora_pairs(adapter) -> tuple[dict[str, tuple[Any, Any]], float]:
    """{base tensor name: (lora_a, lora_b) reader tensors} and alpha of a GGUF adapter reader."""
    field = adapter.fields.get("adapter.lora.alpha")
    if field is None:
        raise ModelFileError(f"{adapter.data.filename}: not a GGUF LoRA adapter (no alpha)")
    alpha = float(field.contents())
    parts: dict[str, dict[str, Any]] = {}
    for tensor in adapter.tensors:
        base, _, which = tensor.name.rpartition(".lora_")
        parts.setdefault(base, {})[which] = tensor
    pairs = {}
    for base, ab in parts.items():
        if set(ab) != {"a", "b"}:
            raise ModelFileError(f"{adapter.data.filename}: {base} lacks lora_a or lora_b")
        pairs[base] = (ab["a"], ab["b"])
    return pairs, alpha


# the Hugging Face modules netcast's LoRAs adapt, as peft names them (finetune.TARGETS)
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
HF_MODELS = {  # the Hugging Face repository each embedded model's GGUF was made from
    "embedded": "Qwen/Qwen2.5-Coder-0.5B-Instruct",
    "embedded-1.5b": "Qwen/Qwen2.5-Coder-1.5B-Instruct",
}


def write_peft_adapter(adapter_path: Path, out: Path) -> dict[str, Any]:
    """The GGUF LoRA ``adapter_path`` as a peft adapter folder ``out`` (``adapter_config.json``
    and ``adapter_model.safetensors``, the same f16 numbers), which vLLM (``--enable-lora``),
    peft and transformers load over the Hugging Face model the embedded GGUF was made from.
    Returns the config written."""
    from safetensors.numpy import save_file

    tensors, config = peft_tensors(adapter_path)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: is a file; give a folder for the peft adapter")
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    write_json(out / "adapter_config.json", config)
    return config


def adapter_base_sha256(path: Path) -> str | None:
    """The base model's sha256 a GGUF LoRA adapter's header names (one line if unreadable)."""
    return _gguf_base(Path(path))


def peft_tensors(adapter_path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The GGUF LoRA ``adapter_path`` as peft names it: its tensors by their peft state-dict
    names (f16 arrays, as stored) and its peft config."""
    import gguf

    try:
        reader = gguf.GGUFReader(str(adapter_path))
        arch = _field_str(reader, "general.architecture")
    except Exception as err:  # gguf raises ValueError, KeyError, struct errors on a bad file
        raise ModelFileError(f"{adapter_path}: not a readable GGUF LoRA adapter ({err})") from None
    pairs, alpha = lora_pairs(reader)
    base = _field_str(reader, "netcast.base") if "netcast.base" in reader.fields else ""
    arch_ids = {name: key for key, name in gguf.MODEL_ARCH_NAMES.items()}
    if not pairs or arch not in arch_ids:
        raise ModelFileError(f"{adapter_path}: an adapter of no tensor, or of an unknown {arch!r}")
    blocks = 1 + max(int(name.split(".")[1]) for name in pairs)
    arch_id = arch_ids[arch]
    name_map = gguf.get_tensor_name_map(arch_id, blocks)
    hf_names = {}
    for block in range(blocks):
        for part in ("self_attn", "mlp"):
            for proj in PROJECTIONS:
                hf = f"model.layers.{block}.{part}.{proj}"
                if (mapped := name_map.get_name(hf)) is not None:
                    hf_names[mapped + ".weight"] = hf
    tensors, targets, rank = {}, set(), 0
    for name, (a, b) in sorted(pairs.items()):
        if name not in hf_names:
            raise ModelFileError(
                f"{adapter_path}: {name}: no Hugging Face module of {arch} adapts it"
            )
        hf = hf_names[name]
        tensors[f"base_model.model.{hf}.lora_A.weight"] = a.data.copy()
        tensors[f"base_model.model.{hf}.lora_B.weight"] = b.data.copy()
        targets.add(hf.rpartition(".")[2])
        rank = int(a.data.shape[0])
    config = {
        "base_model_name_or_path": HF_MODELS.get(base, ""),
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": rank,
        "lora_alpha": alpha,
        "lora_dropout": 0.0,
        "target_modules": sorted(targets),
        "bias": "none",
        "fan_in_fan_out": False,
        "inference_mode": True,
    }
    return tensors, config
