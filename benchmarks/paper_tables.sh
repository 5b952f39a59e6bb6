#!/usr/bin/env bash
# The papers' ablation tables (benchmarks/README.md, "Paper tables") at n = 30 (N=... to
# change), in the order below. Each script keeps its per-question rows under
# benchmarks/results/paper-tables/<table>/<configuration>/ and skips the finished ones, so a
# stopped run resumes with the same command (in another session too, once the rows are
# committed); the tables it prints are saved beside them as <script>-n<N>.txt. laziness.py keeps
# no rows (one decision per question and length, seeded padding: a rerun is served from DSPy's
# cache). One model evaluation at a time: the machine has 2 cores.
#
#     bash benchmarks/paper_tables.sh             # every script, in order
#     bash benchmarks/paper_tables.sh laziness    # one: laziness | iterkey | iterative |
#                                                 #   one_shot | test_time | knowledge
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
N="${N:-30}"
OUT=benchmarks/results/paper-tables

run() {
  # run SCRIPT [options...]: the script on the first N questions, its tables saved
  local script="$1"
  shift
  mkdir -p "$OUT"
  $PY "benchmarks/$script.py" --questions "$N" "$@" | tee "$OUT/$script-n$N.txt"
}

case "${1:-all}" in
  laziness) run laziness ;;
  iterkey) run iterkey_tables ;;
  iterative) run iterative_tables ;;
  one_shot) run one_shot_tables ;;
  test_time) run test_time_tables ;;
  # 2WikiMultiHopQA is hub-only (no network here): MuSiQue's bundled sample, Table 1
  knowledge) run knowledge_tables --dataset musique-sample ;;
  all)
    run laziness
    run iterkey_tables
    run iterative_tables
    run one_shot_tables
    run test_time_tables
    run knowledge_tables --dataset musique-sample
    ;;
  *) echo "unknown script $1 (see the top of this file)" >&2; exit 2 ;;
esac
