"""What a LoRA training takes in memory, against what netcast's memory check expects
(``netcast.models.lora_provider.memory_needed``), per embedded model and example length. Each
(model, length) trains a fresh LoRA (the finetune defaults: rank 16, every linear projection,
bf16 base) for ``--steps`` steps on one synthetic example of that many tokens (its last 16 the
reply) in a process of its own, so each peak is that training's alone. With ``--mixed N``,
three more rows train N steps over every length in turn, the second calling glibc's
``malloc_trim`` after each step, the third with glibc's mmap threshold fixed at ``--mmap-kib``
(``MALLOC_MMAP_THRESHOLD_``: larger blocks are mapped and unmapped on their own instead of
kept in the heap, where glibc otherwise raises the threshold as blocks are freed): whether a
long run of uneven examples holds more memory than its longest example alone (the allocator's
fragments), and what each remedy gives back at what time a step. With ``--checkpointed``
every row trains with activation checkpointing (each decoder block recomputed in the backward
pass), against the check's estimate for it; ``--compare`` adds each length without it, run
just before, and the checkpointed step's time as a ratio of that row's (one run, so the
machine's load is shared).

    .venv/bin/python benchmarks/finetune_memory.py --models embedded \\
        --tokens 500 1500 2500 --steps 2 --mixed 12
    .venv/bin/python benchmarks/finetune_memory.py --models embedded \\
        --tokens 400 1450 700 1200 900 --steps 1 --mixed 60
    .venv/bin/python benchmarks/finetune_memory.py --models embedded embedded-1.5b \\
        --tokens 1000 2500 4000 --steps 2 --checkpointed
    .venv/bin/python benchmarks/finetune_memory.py --models embedded --tokens 500 1500 2500 \\
        --steps 2 --checkpointed --compare

Peak: the process's peak resident memory (ru_maxrss); loaded: resident once the model and its
LoRA are built, before the first step.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import header, table

REPLY = 16


def resident() -> int:
    """This process's resident memory now, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def malloc_trim() -> None:
    """glibc's ``malloc_trim(0)``: free memory returned to the system."""
    import ctypes

    ctypes.CDLL("libc.so.6").malloc_trim(0)


def one(
    model: str, lengths: list[int], steps: int, threads: int, trim: bool, checkpointed: bool
) -> dict:
    """Train ``steps`` steps on examples of ``lengths`` tokens, taken in turn (``trim``: glibc's
    malloc_trim after every step; ``checkpointed``: activation checkpointing); the memory
    figures, in bytes."""
    from netcast.models import embedded, lora, lora_provider, training

    spec = embedded.spec(model)
    path = embedded.model_path(spec.name)
    cfg = lora_provider.TrainSettings()
    base = training.load_base(path)
    tuned = training.with_lora(base, cfg.rank, cfg.alpha, cfg.dropout, lora_provider.TARGETS)
    if checkpointed:
        training.checkpoint_activations(tuned)
    loaded = resident()
    examples = [
        training.Encoded(
            ids=tuple(100 + (i * 7919) % 30_000 for i in range(tokens)), n_prompt=tokens - REPLY
        )
        for tokens in lengths
    ]
    with tempfile.TemporaryDirectory() as folder:
        result = training.train(
            tuned,
            [examples[step % len(examples)] for step in range(steps)],
            learning_rate=cfg.learning_rate,
            epochs=1,
            batch_size=1,
            warmup_ratio=0.0,
            seed=0,
            threads=threads,
            checkpoint=Path(folder) / "memory.pt",
            checkpoint_every=10**9,
            key="memory",
            on_step=(lambda *_: malloc_trim()) if trim else None,
        )
    return {
        "loaded": loaded,
        "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "estimate": lora_provider.memory_needed(lora.base_shape(path), max(lengths), checkpointed),
        "seconds": result.seconds / steps,
    }


def parse() -> argparse.Namespace:
    made = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    made.add_argument("--models", nargs="+", default=["embedded"])
    made.add_argument("--tokens", nargs="+", type=int, default=[500, 1500])
    made.add_argument("--steps", type=int, default=2)
    made.add_argument("--threads", type=int, default=2)
    made.add_argument(
        "--mixed",
        type=int,
        default=0,
        help="also a row of this many steps over all --tokens lengths in turn, one with "
        "glibc's malloc_trim after each step and one with a fixed mmap threshold",
    )
    made.add_argument(
        "--mmap-kib",
        type=int,
        default=128,
        help="the --mixed row's fixed mmap threshold, KiB (glibc's starting default: 128)",
    )
    made.add_argument(
        "--checkpointed", action="store_true", help="train with activation checkpointing"
    )
    made.add_argument(
        "--compare",
        action="store_true",
        help="with --checkpointed: each length also without it, and the time ratio",
    )
    made.add_argument("--trim", action="store_true", help=argparse.SUPPRESS)
    made.add_argument("--one", nargs=2, metavar=("MODEL", "TOKENS"), help=argparse.SUPPRESS)
    args = made.parse_args()
    if args.compare and not args.checkpointed:
        made.error("--compare compares with --checkpointed: give both")
    return args


def measured_rows(args: argparse.Namespace, runs: list, compare: bool) -> list[list[str]]:
    """A table row per model and run, each run in a process of its own (``--one``)."""
    rows, plain_seconds = [], None
    for model in args.models:
        for lengths, steps, alloc, checkpointed in runs:
            command = [sys.executable, __file__, "--one", model, lengths]
            command += ["--steps", str(steps), "--threads", str(args.threads)]
            command += ["--trim"] if alloc == "trim" else []
            command += ["--checkpointed"] if checkpointed else []
            env = dict(os.environ)
            if alloc == "mmap":  # read by glibc when the process starts
                env["MALLOC_MMAP_THRESHOLD_"] = str(args.mmap_kib * 1024)
            tokens = " / ".join(f"{int(t):,}" for t in lengths.split(","))
            what = (
                f"{tokens}, {steps} steps"
                + {
                    None: "",
                    "trim": ", malloc_trim",
                    "mmap": f", mmap threshold {args.mmap_kib} KiB",
                }[alloc]
            )
            what += ", checkpointed" if compare and checkpointed else ""
            done = subprocess.run(command, capture_output=True, text=True, env=env)
            if done.returncode:  # -9: killed, most likely by the kernel for want of memory
                print(done.stderr[-2000:], file=sys.stderr)
                rows.append(
                    [model, what, f"failed (exit {done.returncode})"] + [""] * (4 + compare)
                )
                plain_seconds = None
                continue
            got = json.loads(done.stdout.strip().splitlines()[-1])
            gib = 2**30
            row = [
                model,
                what,
                f"{got['loaded'] / gib:.1f}",
                f"{got['peak'] / gib:.1f}",
                f"{got['estimate'] / gib:.1f}",
                f"{got['peak'] / got['estimate']:.2f}x",
                f"{got['seconds']:.1f}",
            ]
            if compare:  # the plain row of this length ran just before
                ratio = checkpointed and plain_seconds
                row.append(f"{got['seconds'] / plain_seconds:.2f}x" if ratio else "")
                plain_seconds = None if checkpointed else got["seconds"]
            rows.append(row)
    return rows


def main() -> None:
    args = parse()
    if args.one:
        lengths = [int(t) for t in args.one[1].split(",")]
        got = one(args.one[0], lengths, args.steps, args.threads, args.trim, args.checkpointed)
        print(json.dumps(got))
        return
    compare = args.checkpointed and args.compare
    modes = [False, True] if compare else [args.checkpointed]
    runs = [(str(t), args.steps, None, mode) for t in args.tokens for mode in modes]
    if args.mixed:
        mixed = ",".join(str(t) for t in args.tokens)
        runs += [(mixed, args.mixed, alloc, args.checkpointed) for alloc in (None, "trim", "mmap")]
    rows = measured_rows(args, runs, compare)
    header(
        "LoRA training memory against the memory check's estimate",
        [f"one process a row, {args.threads} threads"]
        + (["activation checkpointing (each block recomputed)"] if args.checkpointed else [])
        + (["each length without checkpointing, then with it"] if compare else []),
    )
    columns = ["model", "example tokens", "loaded GiB", "peak GiB", "estimate GiB", "peak/estimate"]
    table([*columns, "s a step"] + (["time vs without"] if compare else []), rows)


if __name__ == "__main__":
    main()
