"""Which of llama.cpp's CPU backends this machine runs.

A runtime-dispatch build of llama.cpp (``GGML_BACKEND_DL`` with ``GGML_CPU_ALL_VARIANTS``, the
quick start's install) ships one CPU backend library per x86 level,
``site-packages/bin/libggml-cpu-<variant>.so``. Each scores how well it fits this CPU from the
features the CPU advertises (``ggml_backend_score``), and ggml loads the best score. A virtual
machine can advertise a feature it does not execute (AMX tiles under some hypervisors): the
chosen library then dies at its first matrix product with SIGILL, and the process with it,
without a word.

So before a model is first used, netcast tries the variants, best score first, each in a child
process that loads it and decodes a few tokens with the embedded model (``probe``), and keeps the
first that runs; where that one uses AMX, the next one is tried too and the faster at prompt
processing is kept (``choose``). The verdict is stored per machine (the CPU's name and flags) and
per build (the variant files), so later runs only read it (``verdict``).
``NETCAST_CPU_BACKEND=<variant>`` picks one by hand, untried.

    python -m netcast.models.backends LIBRARY MODEL   # one probe: a JSON line, or a death
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from filelock import FileLock

from netcast import settings
from netcast.errors import ModelSetupError

PREFIX, SUFFIX = "libggml-cpu-", ".so"
PROBE_TIMEOUT = 300.0  # seconds a probe may take (it loads the model: a few seconds)
PROBE_PROMPT_TOKENS = 128  # evaluated twice, the faster pass counted
PROBE_GENERATED_TOKENS = 16
ENV = "NETCAST_CPU_BACKEND"
AMX = "AMX_INT8 = 1"  # what llama.cpp's system info says of a backend built with AMX
ILLEGAL = ("SIGILL",)  # how a variant dies whose instructions this machine does not execute


@dataclass(frozen=True)
class Variant:
    """One CPU backend library and the score it gives this CPU (0: it cannot run here)."""

    name: str
    path: Path | None  # None: the build's linked-in CPU backend
    score: int


@dataclass(frozen=True)
class Probe:
    """What a child process that loaded ``variant`` and decoded a few tokens showed."""

    variant: str
    ok: bool
    died: str = ""  # "SIGILL", "exit 1: <its last line>", "timed out after 300 s"
    prompt_tokens_per_s: float = 0.0
    generated_tokens_per_s: float = 0.0
    features: str = ""  # llama.cpp's system info with the variant loaded

    @property
    def amx(self) -> bool:
        return AMX in self.features


@dataclass(frozen=True)
class Verdict:
    """The variant this machine loads, why, and the probes that decided it."""

    variant: str
    path: str
    reason: str
    probes: list[Probe] = field(default_factory=list)
    fallback: bool = False  # a better-scoring variant died here
    key: str = ""
    when: str = ""
    settled: bool = True  # every probe ran or died of an illegal instruction: worth keeping

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Verdict:
        probes = [Probe(**p) for p in data.get("probes", [])]
        return cls(**{**data, "probes": probes})


def variant_name(path: Path) -> str:
    return path.name.removeprefix(PREFIX).removesuffix(SUFFIX)


def library_score(path: Path) -> int:
    """The score variant library ``path`` gives this CPU, as ggml computes it when it picks
    one (its exported ``ggml_backend_score``: cpuid checks, no instruction of the variant's own
    runs); 0 for a library that does not load or exports no score."""
    try:
        library = ctypes.CDLL(str(path))
        score = library.ggml_backend_score
    except (OSError, AttributeError):
        return 0
    score.restype = ctypes.c_int
    return int(score())


def variant_files(directory: Path) -> list[Path]:
    return sorted(Path(directory).glob(f"{PREFIX}*{SUFFIX}"))


def cpu_variants(directory: Path, score: Callable[[Path], int] = library_score) -> list[Variant]:
    """The CPU backend variants in ``directory`` that this CPU can run by its advertised
    features (score > 0), best score first (ggml's order)."""
    found = [Variant(variant_name(path), path, score(path)) for path in variant_files(directory)]
    return sorted((v for v in found if v.score > 0), key=lambda v: (-v.score, v.name))


def cpu_description() -> str:
    """The CPU's model name and flags as the kernel reports them (what a verdict is keyed on)."""
    name, flags = "", ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not name:
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = " ".join(sorted(value.split()))
    return f"{name} | {flags}"


def machine_key(files: list[Path], cpu: str | None = None, directory: Path | None = None) -> str:
    """One hash of this CPU (name and flags) and this build (its folder, each variant file's
    name, size and modification time): a verdict stored under another key is not this
    machine's, nor this install's."""
    digest = hashlib.sha256((cpu if cpu is not None else cpu_description()).encode())
    digest.update(f"|{Path(directory).resolve() if directory else ''}".encode())
    for path in sorted(files):
        st = path.stat()
        digest.update(f"|{path.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return digest.hexdigest()


CHILD = [sys.executable, "-m", "netcast.models.backends"]  # + LIBRARY MODEL


def probe(variant: Variant, model_path: Path, timeout: float = PROBE_TIMEOUT) -> Probe:
    """Load ``variant`` in a child process and decode a few tokens of ``model_path`` there: a
    variant whose instructions this machine does not execute kills the child, not us. A
    variant with an empty path measures the build's linked-in CPU backend."""
    command = [*CHILD, str(variant.path or ""), str(model_path)]
    try:
        # its own session: a Ctrl-C meant for us does not kill it and pass for a dying variant
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout, start_new_session=True
        )
    except subprocess.TimeoutExpired:
        return Probe(variant.name, False, f"timed out after {timeout:.0f} s")
    return probe_result(variant.name, done.returncode, done.stdout, done.stderr)


def probe_result(name: str, returncode: int, stdout: str, stderr: str) -> Probe:
    """A probe's child process, read: its JSON line, or how it died."""
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return Probe(name, False, signal.Signals(-returncode).name)
        return Probe(name, False, f"signal {-returncode}")
    lines = stdout.strip().splitlines()
    if returncode == 0 and lines:
        with contextlib.suppress(ValueError, TypeError):
            return Probe(name, True, **json.loads(lines[-1]))
    last = (stderr.strip().splitlines() or ["no output"])[-1][:200]
    return Probe(name, False, f"exit {returncode}: {last}")


def choose(variants: list[Variant], run: Callable[[Variant], Probe]) -> Verdict:
    """The first variant, best score first, whose probe runs; where it uses AMX, the next one
    that runs too, and the faster of the two at prompt processing. Only a probe that dies of an
    illegal instruction passes over its variant; one that fails otherwise (interrupted, killed,
    timed out, a model file that does not load) says nothing of the CPU: that variant is used
    untried and the verdict is not ``settled`` (not kept). ``ModelSetupError`` (one line) if
    every variant dies."""
    probes: list[Probe] = []
    chosen: Variant | None = None
    for variant in variants:
        probes.append(run(variant))
        if not probes[-1].ok and probes[-1].died not in ILLEGAL:
            kept = chosen or variant
            reason = f"not checked: {probes[-1].variant}'s check failed ({probes[-1].died})"
            return Verdict(kept.name, str(kept.path), reason, probes, settled=False)
        if not probes[-1].ok:
            continue
        if chosen is None:
            chosen = variant
            if not probes[-1].amx:
                break
        else:  # chosen uses AMX: keep it only if it is faster than this one
            mine = next(p for p in probes if p.variant == chosen.name)
            if probes[-1].prompt_tokens_per_s > mine.prompt_tokens_per_s:
                chosen = variant
            break
    if chosen is None:
        tried = "; ".join(f"{p.variant}: {p.died}" for p in probes) or "none found"
        raise ModelSetupError(
            f"no llama.cpp CPU backend runs on this machine ({tried}); reinstall llama-cpp-python "
            'with CMAKE_ARGS="-DGGML_NATIVE=OFF" (one portable backend)'
        )
    return Verdict(
        chosen.name, str(chosen.path), _reason(chosen, probes), probes, _fell(chosen, probes)
    )


def _fell(chosen: Variant, probes: list[Probe]) -> bool:
    return any(not p.ok for p in probes[: [p.variant for p in probes].index(chosen.name)])


def _reason(chosen: Variant, probes: list[Probe]) -> str:
    parts = [f"{p.variant} died on this machine ({p.died})" for p in probes if not p.ok]
    ran = [p for p in probes if p.ok]
    if len(ran) == 2:  # an AMX variant against the next one
        mine, other = sorted(ran, key=lambda p: p.variant != chosen.name)
        parts.append(
            f"{mine.variant} ran prompts faster here ({mine.prompt_tokens_per_s:.0f} tokens/s "
            f"against {other.variant}'s {other.prompt_tokens_per_s:.0f})"
        )
    return "; ".join(parts) or "the best-scoring variant for this CPU, and it runs"


def verdict_path(key: str) -> Path:
    return settings.runtime_dir() / f"cpu-backend-{key[:16]}.json"


def verdict(
    directory: Path,
    model_path: Callable[[], Path],
    *,
    refresh: bool = False,
    run: Callable[[Variant, Path], Probe] = probe,
    score: Callable[[Path], int] = library_score,
    say: Callable[[str], None] | None = None,
) -> Verdict:
    """The CPU backend variant of ``directory`` this machine loads: ``$NETCAST_CPU_BACKEND``
    if set; else the stored verdict of this machine and build; else probed now (``choose``,
    with ``model_path()``), stored, and, where a better-scoring variant died, said in one line
    (``say``, default: stderr)."""
    files = variant_files(directory)
    pinned = os.environ.get(ENV)
    if pinned:
        for path in files:
            if variant_name(path) == pinned:
                return Verdict(pinned, str(path), f"{ENV}={pinned}")
        names = ", ".join(variant_name(p) for p in files) or "none"
        raise ModelSetupError(f"{ENV}={pinned}: no such CPU backend here (this build has: {names})")
    key = machine_key(files, directory=directory)
    path = verdict_path(key)
    if not refresh and (stored := _stored(path, key)):
        return stored
    with _locked(path):  # another process probing: wait for its verdict
        if not refresh and (stored := _stored(path, key)):
            return stored
        model = model_path()
        chosen = choose(cpu_variants(directory, score), lambda v: run(v, model))
        chosen = Verdict(**{**chosen.__dict__, "key": key, "when": time.strftime("%Y-%m-%d")})
        if chosen.settled:
            _store(path, chosen)
    if chosen.fallback:
        died = ", ".join(f"{p.variant} ({p.died})" for p in chosen.probes if not p.ok)
        (say or _stderr)(
            f"netcast: llama.cpp's CPU backend {died} dies on this machine; using "
            f"{chosen.variant} instead (netcast runtime tells more)"
        )
    return chosen


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """``path``'s lock file held; where its folder cannot be written, no lock (the probe runs,
    its verdict is not kept)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(path) + ".lock")
        lock.acquire()
    except OSError:
        yield
        return
    try:
        yield
    finally:
        lock.release()


def _store(path: Path, chosen: Verdict) -> None:
    """Keep ``chosen`` at ``path``; where the folder cannot be written, the next run tries
    again (nothing is lost but its seconds)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        tmp.write_text(json.dumps(chosen.to_json(), indent=1) + "\n")
        tmp.replace(path)


def _stored(path: Path, key: str) -> Verdict | None:
    """The verdict stored at ``path`` if it is this machine's and its library is there."""
    try:
        stored = Verdict.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return stored if stored.key == key and Path(stored.path).exists() else None


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _measure(library: str, model: str) -> dict:
    """The child's side of a probe: only ``library`` loaded as the CPU backend, the model's
    prompt processing and greedy decoding timed."""
    import llama_cpp

    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    ggml = ctypes.CDLL(str(lib_dir / "libggml.so.0"))
    ggml.ggml_backend_load.restype = ctypes.c_void_p
    if library and not ggml.ggml_backend_load(library.encode()):
        raise SystemExit(f"ggml_backend_load({library}) failed")
    threads = os.cpu_count() or 1
    llm = llama_cpp.Llama(
        model_path=model, n_ctx=512, n_threads=threads, n_threads_batch=threads, verbose=False
    )
    text = " ".join(f"Passage {i}: the river flows past the old mill." for i in range(40))
    tokens = llm.tokenize(text.encode())[:PROBE_PROMPT_TOKENS]
    prompt_seconds = []
    for _ in range(2):
        llm.reset()
        start = time.perf_counter()
        llm.eval(tokens)
        prompt_seconds.append(time.perf_counter() - start)
    start = 0.0
    for n, _token in enumerate(llm.generate(tokens, temp=0.0)):
        if n == 0:  # the first comes from the prompt's logits: the clock starts after it
            start = time.perf_counter()
        elif n >= PROBE_GENERATED_TOKENS:
            break
    generate_seconds = time.perf_counter() - start
    return {
        "prompt_tokens_per_s": round(len(tokens) / min(prompt_seconds), 1),
        "generated_tokens_per_s": round(PROBE_GENERATED_TOKENS / generate_seconds, 1),
        "features": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
    }


def runtime(model_path: Path, directory: Path, refresh: bool = False) -> dict:
    """What ``netcast runtime`` prints: llama.cpp's version, the CPU, the backend variant in
    use and why (probed again with ``refresh``), the threads, and the prompt and generation
    speed of ``model_path`` measured now in a child process with that variant."""
    import llama_cpp

    threads = os.cpu_count() or 1
    if variant_files(directory):
        chosen = verdict(directory, lambda: model_path, refresh=refresh)
        variant = Variant(chosen.variant, Path(chosen.path), 0)
    else:
        chosen = Verdict("built in", "", "this build links one CPU backend (no runtime dispatch)")
        variant = Variant("built in", None, 0)
    start = time.perf_counter()
    now = probe(variant, model_path)
    return {
        "llama_cpp_python": llama_cpp.__version__,
        "cpu": cpu_description().split(" | ")[0],
        "cpu_flags": [f for f in cpu_description().split(" | ")[-1].split() if _notable(f)],
        "verdict": chosen.to_json(),
        "threads": threads,
        "model": str(model_path),
        "measured": asdict(now),
        "seconds": round(time.perf_counter() - start, 1),
    }


def _notable(flag: str) -> bool:
    """The CPU flags llama.cpp's variants are chosen by."""
    return flag.startswith(("avx", "amx", "fma", "f16c", "sse4")) or flag in {"bmi2", "ssse3"}


if __name__ == "__main__":
    print(json.dumps(_measure(sys.argv[1], sys.argv[2])), flush=True)
