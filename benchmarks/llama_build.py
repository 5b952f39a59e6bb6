"""Time llama-cpp-python's wheel build with two sets of CMake flags, alternated, and print a table.

The install's time is dominated by this build. Each build downloads the pinned sdist and compiles
it from scratch (`pip wheel --no-deps --no-cache-dir`); builds alternate A, B, A, B so a slow
spell on a shared machine lands on both. Besides wall seconds it reports the CPU seconds the build's
processes used (user + system, from the kernel's accounting of waited-for children): the
compiler's work, which other jobs on a shared machine change much less than the wall clock.

    python benchmarks/llama_build.py --pairs 2 --out /tmp/llama-wheels
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

VERSION = "0.3.36"
BASE = "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON"
FLAGS = {"A": BASE, "B": BASE + " -DLLAVA_BUILD=OFF"}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build(flags: str, out: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one wheel build with CMake flags ``flags``."""
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CMAKE_ARGS=flags)
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-cache-dir",
        "-q",
        "-w",
        str(out),
        f"llama-cpp-python=={VERSION}",
    ]
    start, cpu = time.perf_counter(), _children_cpu()
    subprocess.run(cmd, env=env, check=True)
    return time.perf_counter() - start, _children_cpu() - cpu


def _cells(values: list[float], base: list[float]) -> str:
    ratios = ", ".join(f"{v / b:.2f}x" for v, b in zip(values, base, strict=True))
    return f"{', '.join(f'{v:.0f}' for v in values)} | {statistics.mean(values):.0f} | {ratios}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/llama-wheels"))
    args = parser.parse_args()
    wall: dict[str, list[float]] = {"A": [], "B": []}
    cpu: dict[str, list[float]] = {"A": [], "B": []}
    for pair in range(args.pairs):
        for name in ("A", "B"):
            took, used = build(FLAGS[name], args.out / f"{name}{pair}")
            wall[name].append(took)
            cpu[name].append(used)
            load = os.getloadavg()[2]
            print(
                f"pair {pair + 1} {name}: {took:.0f} s wall, {used:.0f} CPU s, "
                f"load (15 min) {load:.1f}",
                flush=True,
            )
    print(
        f"\nmachine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )
    print(f"command: python benchmarks/llama_build.py --pairs {args.pairs}\n")
    for name in ("A", "B"):
        print(f'{name}: CMAKE_ARGS="{FLAGS[name]}"')
    print("\n| build | wall s (each) | mean | vs A | CPU s (each) | mean | vs A |")
    print("|---|---|---|---|---|---|---|")
    for name in ("A", "B"):
        print(f"| {name} | {_cells(wall[name], wall['A'])} | {_cells(cpu[name], cpu['A'])} |")


if __name__ == "__main__":
    main()
