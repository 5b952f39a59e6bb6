"""Why a LoRA training's frozen base is bfloat16 on some CPUs and float32 on others
(``netcast.models.training.train_dtype``): what torch reads of this CPU, the dtype netcast
picks from it, and the time of one matrix product of the shape a 0.5B feed-forward projection
computes (``--tokens`` x 896 by 896 x 4,864) in float32 and in bfloat16, as a ratio measured in
one run. Without AVX512_BF16 or AMX, torch emulates bfloat16 products.

    .venv/bin/python benchmarks/train_dtype.py --tokens 512 --repeats 5 --threads 2

The training itself in the chosen dtype, its seconds per step and peak memory against the
memory check's estimate: ``benchmarks/finetune_memory.py --tokens 1000 --steps 2``.
"""

from __future__ import annotations

import argparse
import time

from _common import header, table


def product_seconds(dtype: str, tokens: int, repeats: int) -> float:
    """Mean seconds of one ``tokens`` x 896 by 896 x 4,864 product in ``dtype`` (one warm-up
    product first)."""
    import torch

    kind = getattr(torch, dtype)
    torch.manual_seed(0)
    a, b = torch.randn(tokens, 896).to(kind), torch.randn(896, 4_864).to(kind)
    a @ b
    started = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return (time.perf_counter() - started) / repeats


def main() -> None:
    made = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    made.add_argument("--tokens", type=int, default=512)
    made.add_argument("--repeats", type=int, default=5)
    made.add_argument("--threads", type=int, default=2)
    args = made.parse_args()
    import torch

    from netcast.models import training

    torch.set_num_threads(args.threads)
    header("The training dtype on this CPU")
    cpu = torch.cpu
    flags = {
        "torch CPU capability": torch.backends.cpu.get_cpu_capability(),
        "AVX512_BF16": cpu._is_avx512_bf16_supported(),
        "AMX tiles": cpu._is_amx_tile_supported(),
        "netcast trains the base in": training.train_dtype(),
    }
    table(["read of this CPU", "value"], [[k, str(v)] for k, v in flags.items()])
    seconds = {d: product_seconds(d, args.tokens, args.repeats) for d in ("float32", "bfloat16")}
    rows = [[d, f"{s:.3f}", f"{s / seconds['float32']:.1f}x"] for d, s in seconds.items()]
    print()
    table(["dtype", "s per product", "vs float32"], rows)


if __name__ == "__main__":
    main()
