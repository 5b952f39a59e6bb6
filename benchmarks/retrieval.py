"""Index build time and query latency (p50, p95) of BM25, dense and hybrid retrieval on the
bundled HotpotQA corpus (all pooled paragraphs of hotpotqa-sample).

    .venv/bin/python benchmarks/retrieval.py --queries 300
"""

from __future__ import annotations

import argparse
import time

from _common import header, percentile, table

from netcast.corpus import Corpus
from netcast.data import load_dataset
from netcast.models.tokens import embedded_counter
from netcast.retrievers import build_retriever
from netcast.retrievers.bm25 import BM25Retriever
from netcast.retrievers.dense import DenseRetriever, embedding_model
from netcast.retrievers.hybrid import HybridRetriever


def latencies_ms(retriever, queries: list[str], k: int = 5) -> list[float]:
    out = []
    for q in queries:
        start = time.perf_counter()
        retriever.search(q, k)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    data = load_dataset("hotpotqa-sample", "dev", limit=args.queries)
    counter = embedded_counter()
    start = time.perf_counter()
    corpus = Corpus.from_documents(data.documents, counter)
    chunk_s = time.perf_counter() - start
    embedding_model()  # load once, outside the timings
    queries = [ex.question for ex in data.examples]

    header(f"Retrieval on the bundled corpus ({len(corpus)} passages, {len(queries)} queries, k=5)")
    rows = []
    start = time.perf_counter()
    bm25 = build_retriever(corpus, "bm25")
    rows.append(["bm25", time.perf_counter() - start, bm25])
    start = time.perf_counter()
    dense = build_retriever(corpus, "dense")
    dense_s = time.perf_counter() - start
    rows.append(["dense", dense_s, dense])
    hybrid = HybridRetriever(corpus, [bm25, dense])
    rows.append(["hybrid (bm25 + dense, RRF depth 50)", rows[0][1] + dense_s, hybrid])
    assert isinstance(bm25, BM25Retriever) and isinstance(dense, DenseRetriever)
    for _, _, r in rows:
        r.search("warm up", 5)
    out = []
    for name, build_s, r in rows:
        ms = latencies_ms(r, queries)
        out.append([name, build_s, len(corpus) / build_s, percentile(ms, 50), percentile(ms, 95)])
    table(["retriever", "build s", "passages/s", "query p50 ms", "query p95 ms"], out)
    print(f"chunking + token counting (embedded tokenizer): {chunk_s:.2f} s")
    print("hybrid build = bm25 build + dense build (it builds both).")


if __name__ == "__main__":
    main()
