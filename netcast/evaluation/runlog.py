"""A run directory: ``run.json`` (what was run), ``predictions.jsonl`` (one row per finished
question, appended as each finishes) and ``aggregate.json``. Re-opening the same run resumes it."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from netcast.errors import InputError
from netcast.formats import RunRow, check_shape, read_json

# keys a run.json holds since a later version: ``artifact`` (netcast.artifacts.artifact_id)
RECORDED_SINCE = frozenset({"artifact"})


def newer_knobs_at_default(
    stored: dict[str, Any], info: dict[str, Any], defaults: dict[str, Any]
) -> dict[str, Any]:
    """``info`` without the knobs ``stored`` predates that are at their ``defaults`` (a knob
    added to the program since the run, whose default keeps the program as it ran)."""
    old, new = stored.get("knobs"), info.get("knobs")
    if not isinstance(old, dict) or not isinstance(new, dict):
        return info
    added = {k for k in new.keys() - old.keys() if k in defaults and new[k] == defaults[k]}
    return {**info, "knobs": {k: v for k, v in new.items() if k not in added}}


def _current_names(
    stored: dict[str, Any], info: dict[str, Any], read_knobs: Callable[[dict], dict] | None
) -> dict[str, Any]:
    """A saved ``run.json`` of the same program with its knobs under their current names
    (``read_knobs``: the program's ``stored_knobs``; a knob saved under an alias, e.g. basic's
    ``top_k`` before it was ``k``, is the same run)."""
    knobs = stored.get("knobs")
    same = read_knobs is not None and stored.get("program") == info.get("program")
    return {**stored, "knobs": read_knobs(knobs)} if same and isinstance(knobs, dict) else stored


def read_rows(path: Path) -> tuple[list[dict[str, Any]], int]:
    """A ``predictions.jsonl``'s rows, each checked (``netcast.formats.RunRow``), and its number
    of lines; a torn last line (a kill mid-write) is left out, anything else that is not a row
    is one ``InputError`` naming the line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text (not a run's predictions file)") from None
    rows = []
    for n, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if n == len(lines):
                break
            raise InputError(f"{path}:{n}: corrupted row") from None
        rows.append(check_shape(row, RunRow, f"{path}:{n}"))
    return rows, len(lines)


def read_run_info(run_dir: Path) -> dict[str, Any]:
    """A run directory's ``run.json`` (what was run), or nothing when it has none."""
    path = run_dir / "run.json"
    return read_json(path, dict, "run's settings") if path.exists() else {}


class RunLog:
    def __init__(
        self,
        run_dir: str | Path,
        info: dict[str, Any],
        knob_defaults: dict[str, Any] | None = None,
        read_knobs: Callable[[dict], dict] | None = None,
    ):
        """``knob_defaults``: the program's knob defaults, so a run saved before a knob was
        added (at a default that keeps the program as it ran) still resumes; ``read_knobs``:
        the program's reading of a stored knob dict (its aliases), so one saved under an old
        name does too."""
        self.dir = Path(run_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        meta_path = self.dir / "run.json"
        if meta_path.exists():
            saved = read_json(meta_path, dict, "run's settings")
            stored = _current_names(saved, info, read_knobs)
            # a run saved before runs recorded these still resumes under the same settings; one
            # that recorded nothing (evaluate() without run_info, before it had a default) too
            info = {k: v for k, v in info.items() if k in stored or k not in RECORDED_SINCE}
            if stored and stored != newer_knobs_at_default(stored, info, knob_defaults or {}):
                changed = sorted(k for k in {*stored, *info} if stored.get(k) != info.get(k))
                raise InputError(
                    f"{self.dir} holds a different run (differs in: {', '.join(changed)}); "
                    "use another --run-dir or delete it"
                )
        else:
            meta_path.write_text(json.dumps(info, indent=2, sort_keys=True))
        self.rows: dict[str, dict[str, Any]] = self._read_rows()

    @property
    def predictions_path(self) -> Path:
        return self.dir / "predictions.jsonl"

    def _read_rows(self) -> dict[str, dict[str, Any]]:
        """Finished rows; a torn last line (a kill mid-write) is dropped and redone."""
        if not self.predictions_path.exists():
            return {}
        read, n_lines = read_rows(self.predictions_path)
        rows = {row["id"]: row for row in read}
        valid = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows.values())
        if len(rows) != n_lines:
            self.predictions_path.write_text(valid, encoding="utf-8")
        return rows

    def append(self, row: dict[str, Any]) -> None:
        with self._lock:
            if row["id"] in self.rows:
                return
            with self.predictions_path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
                handle.flush()
            self.rows[row["id"]] = row

    def write_aggregate(self, aggregate: dict[str, Any]) -> None:
        (self.dir / "aggregate.json").write_text(json.dumps(aggregate, indent=2, sort_keys=True))
