"""What a LoRA training takes in memory, against what netcast's memory check expects
(``netcast.models.finetune.memory_needed``), per embedded model and example length. Each
(model, length) trains a fresh LoRA (the finetune defaults: rank 16, every linear projection,
bf16 base) for ``--steps`` steps on one synthetic example of that many tokens (its last 16 the
reply) in a process of its own, so each peak is that training's alone. With ``--mixed N``,
two more rows train N steps over every length in turn, the second calling glibc's
``malloc_trim`` after each step: whether a long run of uneven examples holds more memory than
its longest example alone (the allocator's fragments).

    .venv/bin/python benchmarks/finetune_memory.py --models embedded \\
        --tokens 500 1500 2500 --steps 2 --mixed 12

Peak: the process's peak resident memory (ru_maxrss); loaded: resident once the model and its
LoRA are built, before the first step.
"""

from __future__ import annotations

import argparse
import json
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


def one(model: str, lengths: list[int], steps: int, threads: int, trim: bool) -> dict:
    """Train ``steps`` steps on examples of ``lengths`` tokens, taken in turn (``trim``: glibc's
    malloc_trim after every step); the memory figures, in bytes."""
    from netcast.models import embedded, finetune, lora, training

    spec = embedded.spec(model)
    path = embedded.model_path(spec.name)
    cfg = finetune.TrainSettings()
    base = training.load_base(path)
    tuned = training.with_lora(base, cfg.rank, cfg.alpha, cfg.dropout, finetune.TARGETS)
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
        "estimate": finetune.memory_needed(lora.base_shape(path), max(lengths)),
        "seconds": result.seconds / steps,
    }


def main() -> None:
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
        help="also a row of this many steps over all --tokens lengths in turn, and one with "
        "glibc's malloc_trim after each step",
    )
    made.add_argument("--trim", action="store_true", help=argparse.SUPPRESS)
    made.add_argument("--one", nargs=2, metavar=("MODEL", "TOKENS"), help=argparse.SUPPRESS)
    args = made.parse_args()
    if args.one:
        lengths = [int(t) for t in args.one[1].split(",")]
        print(json.dumps(one(args.one[0], lengths, args.steps, args.threads, args.trim)))
        return
    runs = [(str(t), args.steps, False) for t in args.tokens]
    if args.mixed:
        mixed = ",".join(str(t) for t in args.tokens)
        runs += [(mixed, args.mixed, False), (mixed, args.mixed, True)]
    rows = []
    for model in args.models:
        for lengths, steps, trim in runs:
            command = [sys.executable, __file__, "--one", model, lengths]
            command += ["--steps", str(steps), "--threads", str(args.threads)]
            command += ["--trim"] if trim else []
            tokens = " / ".join(f"{int(t):,}" for t in lengths.split(","))
            what = f"{tokens}, {steps} steps" + (", malloc_trim" if trim else "")
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:  # -9: killed, most likely by the kernel for want of memory
                print(done.stderr[-2000:], file=sys.stderr)
                rows.append([model, what, f"failed (exit {done.returncode})"] + [""] * 4)
                continue
            got = json.loads(done.stdout.strip().splitlines()[-1])
            gib = 2**30
            rows.append(
                [
                    model,
                    what,
                    f"{got['loaded'] / gib:.1f}",
                    f"{got['peak'] / gib:.1f}",
                    f"{got['estimate'] / gib:.1f}",
                    f"{got['peak'] / got['estimate']:.2f}x",
                    f"{got['seconds']:.1f}",
                ]
            )
    header(
        "LoRA training memory against the memory check's estimate",
        [f"one process a row, {args.threads} threads"],
    )
    columns = ["model", "example tokens", "loaded GiB", "peak GiB", "estimate GiB", "peak/estimate"]
    table([*columns, "s a step"], rows)


if __name__ == "__main__":
    main()
