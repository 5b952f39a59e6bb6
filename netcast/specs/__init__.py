"""Benchmarks as specs, the floor above ``netcast.optimize``: it compiles, runs and reports what a
spec declares, with the evaluation primitives (``netcast.evaluation``) and the optimizers below
it and the command line above.

Benchmarks as specs: one TOML file declares a committed result (the dataset and its first N
questions, the model, the run directory, the programs, knob variants and reference rows, the
compiled artifacts with the compile options that made them, or a paper's ablation
configurations), one command runs it and resumes (``spec.run_spec``: artifacts that are missing
are compiled, rows that are missing are run, finished ones are kept), and one rebuilds its
tables from the saved per-question rows without any model call (``tables.spec_report``).

Two kinds:

- ``bench`` (the default): the rows of ``netcast bench`` in ``<run_dir>/<dataset>/<row>/``,
  reported with 95% bootstrap intervals, the paired difference against ``basic`` and against
  a row's own program, the share of the gap to the gold-passage reference closed, the answer
  in the context and the tokens a question.
- ``ablation``: a paper's configurations (``[[config]]``: a label, a program and its knobs) in
  ``<run_dir>/<configuration>/``, reported as the paper's tables (``netcast.specs.papers``),
  with an LLM judge's verdicts kept beside the rows when the table has a judge column.

Relative paths in a spec are read from the working directory (the repository root for the
committed specs). A bad spec is one line naming the file and the field.

The modules: ``model`` (what a spec is), ``spec`` (reading and checking one, running it),
``bench`` (``netcast bench``: programs on the same questions), ``reference`` (the gold-passage and
closed-book rows), ``report`` (bench reports from saved rows), ``tables`` (a spec's tables),
``docs`` (the docs' result tables, generated from the specs), ``rerank`` (``netcast
rerank-check``: which rerank signal keeps the gold documents) and ``papers`` (the papers'
ablation tables, a file a paper)."""
