#!/usr/bin/env bash
# Time the README's first command on a fresh clone of this repository's HEAD, with an empty pip
# cache and an empty netcast home: the install part (up to `netcast ask`) and the job part apart.
#   bash benchmarks/quickstart.sh [WORKDIR]   (default /tmp/netcast-quickstart; it is emptied)
set -euo pipefail
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
work=${1:-/tmp/netcast-quickstart}
rm -rf "$work" && mkdir -p "$work"
git clone -q "$repo" "$work/clone"
cd "$work/clone"
export NETCAST_HOME=$work/home PIP_CACHE_DIR=$work/pip-cache
cmd=$(python3 -c '
import re
text = open("README.md").read()
print(re.search(r"```bash\n(.*?)```", text, re.S).group(1).replace("\\\n", " "))')
install=${cmd%%&& .venv/bin/netcast ask*}
job=${cmd#"$install"}; job=${job#&& }
echo "commit $(git rev-parse --short HEAD); $(nproc) cores; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
for part in install job; do
  echo "$part: ${!part}"
  echo "  start $(date -u +%T), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/time -o "$work/$part.time" -f "%e s wall, %U+%S CPU s, %M KB peak" \
    bash -c "${!part}" > "$work/$part.log" 2>&1
  echo "  $(cat "$work/$part.time")"
done
echo "the job's last lines:"; tail -4 "$work/job.log"
