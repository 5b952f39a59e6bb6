"""A tuned model served two ways: llama.cpp applying the LoRA adapter at run time, and the
adapter merged into a cached model file (netcast.models.merge). Prints prompt and generated
tokens/s of the base, base + runtime adapter and the merged file (alternated per question, so a
busy machine slows all three alike), and how often the merged model's greedy top-1 token agrees
with the runtime adapter's on the answer positions (the runtime adapter's own greedy answer,
teacher-forced through both).

    .venv/bin/python benchmarks/merged_model.py --questions 10 [--adapter SHA256]
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import header, table

SYSTEM = "Answer the question from the passages in a few words."


def prompt_text(example) -> str:
    passages = "\n\n".join(f"{p['title']}: {p['text']}" for p in example.gold_passages)
    return (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{passages}\n\n"
        f"Question: {example.question}<|im_end|>\n<|im_start|>assistant\n"
    )


def load(path, lora_path=None, logits_all=False, threads=2):
    from llama_cpp import Llama

    from netcast.models.native import load_cpu_backends, quiet_native_stderr

    load_cpu_backends()
    with quiet_native_stderr():
        return Llama(
            model_path=str(path),
            lora_path=str(lora_path) if lora_path else None,
            n_ctx=2048,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=logits_all,
            verbose=False,
        )


def speeds(llm, tokens: list[int], new: int) -> tuple[float, float]:
    """(prompt tokens/s, generated tokens/s): ``tokens`` evaluated from an empty context, then
    ``new`` greedy tokens generated after them (the prompt's cache reused)."""
    llm.reset()
    start = time.perf_counter()
    llm.eval(tokens)
    prompt = len(tokens) / (time.perf_counter() - start)
    start = time.perf_counter()
    made = 0
    for _ in llm.generate(tokens, temp=0.0, top_k=1):
        made += 1
        if made >= new:
            break
    return prompt, made / (time.perf_counter() - start)


def greedy(llm, tokens: list[int], new: int) -> list[int]:
    llm.reset()
    out = []
    for token in llm.generate(tokens, temp=0.0, top_k=1):
        if token == llm.token_eos() or len(out) >= new:
            break
        out.append(token)
    return out


def top1(llm, tokens: list[int], answer: list[int]) -> list[int]:
    """The model's argmax at each answer position, ``answer`` teacher-forced after ``tokens``."""
    llm.reset()
    llm.eval(tokens + answer)
    start = len(tokens) - 1
    return [int(llm.scores[start + i].argmax()) for i in range(len(answer))]


def measure_speeds(arms: dict, examples: list, new_tokens: int) -> tuple[list, dict]:
    """Each question's prompt (tokens) and each arm's (prompt, generation) tokens a second on
    it, the arms' order rotated per question."""
    models = {name: load(*paths) for name, paths in arms.items()}
    prompts = [models["base"].tokenize(prompt_text(e).encode(), special=True) for e in examples]
    for llm in models.values():  # warm-up: the files' pages read in, threads started
        speeds(llm, prompts[0][:64], 4)
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in arms}
    names = list(arms)
    for i, tokens in enumerate(prompts):
        for name in names[i % 3 :] + names[: i % 3]:  # rotated order per question
            rates[name].append(speeds(models[name], tokens, new_tokens))
    return prompts, rates


def top1_agreement(arms: dict, prompts: list, new_tokens: int) -> dict[str, list[int]]:
    """For the merged file and the base: [agreeing, compared] top-1 tokens against the runtime
    adapter's, along the runtime adapter's greedy answer."""
    scored = {name: load(*arms[name], logits_all=True) for name in arms}
    agree = {"merged file": [0, 0], "base": [0, 0]}
    for tokens in prompts:
        answer = greedy(scored["runtime adapter"], tokens, new_tokens)
        if not answer:
            continue
        reference = top1(scored["runtime adapter"], tokens, answer)
        for name in agree:
            got = top1(scored[name], tokens, answer)
            agree[name][0] += sum(a == b for a, b in zip(got, reference, strict=True))
            agree[name][1] += len(reference)
    return agree


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--adapter", help="adapter sha256 (default: the newest in the store)")
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args()

    from netcast.data import load_dataset
    from netcast.models import embedded, lora, merge

    spec = embedded.spec()
    base = embedded.model_path()
    sha = (
        args.adapter
        or max(lora.adapters_dir().glob("*.gguf"), key=lambda p: p.stat().st_mtime).stem
    )
    adapter = lora.verified_adapter(sha, spec)
    start = time.perf_counter()
    merged = merge.merged_model(base, sha, spec.sha256)
    build = time.perf_counter() - start
    start = time.perf_counter()
    merge.merged_model(base, sha, spec.sha256)
    reuse = time.perf_counter() - start
    examples = load_dataset("hotpotqa-sample", "dev", limit=args.questions).examples

    arms = {"base": (base, None), "runtime adapter": (base, adapter), "merged file": (merged, None)}
    prompts, rates = measure_speeds(arms, examples, args.new_tokens)
    agree = top1_agreement(arms, prompts, args.new_tokens)

    record = lora.read_record(sha)
    header(
        "A tuned 0.5B: runtime LoRA adapter against the adapter merged into a cached file",
        [
            f"adapter: {sha[:12]}... (rank {record.rank}, alpha {record.alpha:g}, "
            f"{record.examples} training examples; settings {record.settings})",
            f"questions: {len(prompts)} hotpotqa-sample dev, gold passages, prompt "
            f"{min(map(len, prompts))}-{max(map(len, prompts))} tokens; {args.new_tokens} new "
            "tokens; 2 threads; arms rotated per question",
            f"merged file: {build:.1f} s to build or find (first call this run), "
            f"{reuse * 1000:.1f} ms to find again; {merged.stat().st_size:,} bytes (base "
            f"{base.stat().st_size:,})",
        ],
    )
    base_p = [p for p, _ in rates["base"]]
    base_g = [g for _, g in rates["base"]]
    rows = []
    for name in arms:
        p = [r for r, _ in rates[name]]
        g = [r for _, r in rates[name]]
        rows.append(
            [
                name,
                f"{statistics.median(p):.0f}",
                f"{statistics.median(a / b for a, b in zip(p, base_p, strict=True)):.2f}",
                f"{statistics.median(g):.1f}",
                f"{statistics.median(a / b for a, b in zip(g, base_g, strict=True)):.2f}",
                f"{agree[name][0]}/{agree[name][1]}" if name in agree else "(reference)",
            ]
        )
    table(
        [
            "arm",
            "prompt tok/s (median)",
            "x base (median of per-question ratios)",
            "gen tok/s (median)",
            "x base",
            "top-1 agreement with runtime adapter",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
