"""The papers' tables by name (a spec's ``table``), each with its title, its builder, its judge
column's kind and its options' defaults."""

from __future__ import annotations

from netcast.specs.papers.agentic_test_time import test_time_tables
from netcast.specs.papers.common import Table
from netcast.specs.papers.fishing_for_answers import iterative_tables, one_shot_tables
from netcast.specs.papers.iterkey import iterkey_tables
from netcast.specs.papers.knowledge_aware import knowledge_tables

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table(
            "one-shot", "Fishing for Answers §4.2, Tables 1-3 (One-SHOT)", one_shot_tables, "score"
        ),
        Table(
            "iterative",
            "Fishing for Answers §4.3-4.4, Tables 4-5 and Fig. 5 (iterative, combined)",
            iterative_tables,
            "score",
        ),
        Table("test-time", "Test-Time Strategies, Table 1 and Fig. 2", test_time_tables, "match"),
        Table(
            "knowledge",
            "Knowledge-Aware Iterative Retrieval, Tables 1-2",
            knowledge_tables,
            records_context=True,
            options={"price_ratio": 1.0},
        ),
        Table(
            "iterkey",
            "IterKey, Tables 2-5, 9, 11 and 13",
            iterkey_tables,
            options={"top_k": [1, 2, 3, 4, 5]},
        ),
    )
}
