"""Every llama.cpp CPU backend variant of the install on this machine: whether it runs, and its
prompt and generation speed with the embedded model, measured as netcast's backend check
measures (``netcast.models.backends.probe``: a child process per variant, 128 prompt tokens
evaluated twice with the faster counted, 16 tokens generated). Rounds alternate the variants
(best score first) so a slow spell on a shared machine lands on all of them; the table gives
each variant's median and its prompt speed as a ratio of the variant netcast uses here.

    python benchmarks/cpu_variants.py --rounds 3 [--model embedded-1.5b]
"""

from __future__ import annotations

import argparse
import statistics

from _common import header, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default="embedded")
    args = parser.parse_args()

    from netcast.models import backends, embedded
    from netcast.models.native import backend_dir

    model = embedded.model_path(embedded.spec(args.model).name)
    variants = backends.cpu_variants(backend_dir())
    chosen = backends.verdict(backend_dir(), lambda: model)
    runs: dict[str, list[backends.Probe]] = {v.name: [] for v in variants}
    dead: set[str] = set()
    for _ in range(args.rounds):
        for variant in variants:
            if variant.name in dead:
                continue
            probe = backends.probe(variant, model)
            runs[variant.name].append(probe)
            if not probe.ok:
                dead.add(variant.name)  # once is enough to know

    def median(name: str, field: str) -> float:
        return statistics.median(getattr(p, field) for p in runs[name] if p.ok)

    base = median(chosen.variant, "prompt_tokens_per_s")
    header(
        f"llama.cpp CPU backend variants, {args.model} model",
        [
            f"netcast uses: {chosen.variant} ({chosen.reason})",
            f"{args.rounds} rounds, variants alternated; medians",
        ],
    )
    rows = []
    for variant in variants:
        probes = runs[variant.name]
        if not all(p.ok for p in probes):
            died = next(p.died for p in probes if not p.ok)
            rows.append([variant.name, variant.score, f"dies: {died}", "-", "-", "-", "-"])
            continue
        prompt = median(variant.name, "prompt_tokens_per_s")
        rows.append(
            [
                variant.name,
                variant.score,
                "runs",
                f"{prompt:.0f}",
                f"{min(p.prompt_tokens_per_s for p in probes):.0f}-"
                f"{max(p.prompt_tokens_per_s for p in probes):.0f}",
                f"{prompt / base:.2f}x",
                f"{median(variant.name, 'generated_tokens_per_s'):.1f}",
            ]
        )
    columns = ["variant", "score", "here", "prompt tok/s", "range", f"vs {chosen.variant}"]
    table([*columns, "generated tok/s"], rows)


if __name__ == "__main__":
    main()
