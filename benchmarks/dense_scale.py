"""Dense encoding speed (float32 against the bfloat16 the encoder uses where the CPU computes it
natively) and what each faiss index type keeps: recall of the gold passages at k = 5 on the
bundled dev questions over hotpotqa-wide (5,855 passages), and bytes a vector.

    .venv/bin/python benchmarks/dense_scale.py --passages 1000 --questions 150

Speed: the same passages encoded by both dtypes, alternating, two rounds, in one run (the
ratio is the figure; the machine is shared). Quality: every passage encoded once per dtype;
``ivfpq`` and ``hnsw`` are forced here (``auto`` picks ``flat`` below 50k vectors).
"""

from __future__ import annotations

import argparse
import os
import time

from _common import header, table

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passages", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=150)
    args = parser.parse_args()

    import faiss
    import numpy as np

    from netcast.corpus import format_passage
    from netcast.data import load_dataset
    from netcast.evaluation.metrics import retrieval_prf
    from netcast.retrievers.dense import embed, embedding_model, encoder_dtype, make_index

    data = load_dataset("hotpotqa-wide", "dev", args.questions)
    ids = [f"{d.id}#0" for d in data.documents]  # one paragraph, one chunk
    texts = [format_passage(d.title, d.text) for d in data.documents]
    dtypes = ["float32", "bfloat16"]
    for dtype in dtypes:
        embedding_model(dtype)  # loaded outside the timings
        embed(texts[:64], dtype=dtype)
    sample = texts[: args.passages]
    seconds = {dtype: [] for dtype in dtypes}
    for _ in range(2):
        for dtype in dtypes:
            start = time.perf_counter()
            embed(sample, dtype=dtype)
            seconds[dtype].append(time.perf_counter() - start)

    header(
        f"Dense encoding ({len(sample)} passages, 2 rounds) and index types "
        f"({len(texts)} passages, {len(data.examples)} questions, k = 5)",
        notes=[f"encoder dtype chosen on this machine: {encoder_dtype()}"],
    )
    rate = {d: len(sample) * 2 / sum(seconds[d]) for d in dtypes}
    table(
        ["encoder dtype", "passages/s", "x float32"],
        [[d, f"{rate[d]:.1f}", f"{rate[d] / rate['float32']:.2f}"] for d in dtypes],
    )

    vectors = {d: embed(texts, dtype=d) for d in dtypes}
    cos = np.sum(vectors["float32"] * vectors["bfloat16"], axis=1)
    print(f"cosine of bfloat16 to float32 embeddings: mean {cos.mean():.4f}, min {cos.min():.4f}\n")
    rows = []
    for dtype, kind in [
        ("float32", "flat"),
        ("bfloat16", "flat"),
        ("bfloat16", "ivfpq"),
        ("bfloat16", "hnsw"),
    ]:
        index = make_index(vectors[dtype], kind)
        queries = embed([ex.question for ex in data.examples], dtype=dtype)
        found = index.search(queries, 5)[1]
        recall = [
            retrieval_prf([ids[i] for i in row if i >= 0], ex.gold_ids)["recall"]
            for row, ex in zip(found, data.examples, strict=True)
        ]
        size = faiss.serialize_index(index).nbytes / len(texts)
        rows.append([dtype, kind, f"{np.mean(recall):.3f}", f"{size:,.0f}"])
    table(["embeddings", "index", "gold recall@5", "bytes/vector"], rows)


if __name__ == "__main__":
    main()
