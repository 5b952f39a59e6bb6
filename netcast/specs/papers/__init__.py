"""The papers' ablation tables, as specs (``kind = "ablation"``): each configuration (a label, a
program and its knobs) runs on the same questions into its own resumable folder,
``<run_dir>/<configuration>/``, and the paper's tables are built from the saved per-question
rows, without a model call. A table with an LLM-judge column asks the spec's ``judge`` model
once per saved answer when the spec runs and keeps the verdicts beside the rows
(``judge.jsonl``), so the tables rebuild from them too.

``common`` holds what every table reads (a configuration's rows and verdicts, difficulty
levels, the quality and cost table); each paper's tables are in a file of their own
(``fishing_for_answers``, ``agentic_test_time``, ``knowledge_aware``, ``iterkey``), named by
``registry.TABLES``; ``ablation`` runs a spec's configurations and rebuilds its tables."""
