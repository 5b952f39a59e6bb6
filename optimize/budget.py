"""The budget of model calls a search may spend, one object for the joint compile and the
strategy race (``--budget``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

Checked = Literal["chunk", "trial"]


class CallBudget:
    """Model calls a search may spend (``limit``; ``None``: no limit), counted as calls that
    reached the model (DSPy cache hits are free), or, with ``cached_free=False``, as every
    call the programs made, cached or not (the race: its choices and its length then do not
    depend on what the cache holds). ``checked`` is when the limit is looked at:

    - ``"chunk"`` (the strategy race, and each survivor's share of it): a chunk of questions
      is started only when the calls left cover it at the most calls one question of that
      program has taken so far (before its first question, the most of any program, at
      least 1);
    - ``"trial"`` (a joint compile's own ``--budget``): a trial is opened while calls are
      left, and runs to its end.
    """

    def __init__(
        self,
        limit: int | None = None,
        most: dict[str, int] | None = None,
        checked: Checked = "chunk",
        cached_free: bool = True,
    ):
        self.limit = limit
        self.cached_free = cached_free
        self.spent = 0
        self.most = most if most is not None else {}  # per program, calls of its worst question
        self.checked = checked

    @staticmethod
    def cost(row: dict[str, Any], cached_free: bool = True) -> int:
        """The calls one question's row is charged."""
        scores = row["scores"]
        cached = int(scores.get("cached_calls") or 0) if cached_free else 0
        return int(scores.get("lm_calls") or 0) - cached

    def charge(self, program: str, rows: Sequence[dict[str, Any]], extra: int = 0) -> None:
        self.spent += sum(self.cost(r, self.cached_free) for r in rows) + extra
        if rows:
            worst = max(int(r["scores"].get("lm_calls") or 0) for r in rows)
            self.most[program] = max(self.most.get(program, 0), worst)

    def per_question(self, program: str) -> int:
        return self.most.get(program) or max(self.most.values(), default=1) or 1

    def affordable(self, program: str, n: int) -> int:
        """How many of the next ``n`` questions of ``program`` the calls left cover."""
        if self.limit is None:
            return n
        return max(0, min(n, (self.limit - self.spent) // self.per_question(program)))

    def opens(self, program: str, n: int) -> bool:
        """Whether a trial (or a rung) whose first chunk is ``n`` questions may start."""
        if self.checked == "trial":
            return self.limit is None or self.spent < self.limit
        return self.affordable(program, n) >= n

    def covers(self, program: str, n: int) -> bool:
        """Whether the next chunk of ``n`` questions of a trial under way may start."""
        return self.checked == "trial" or self.affordable(program, n) >= n

    def lane(self, limit: int | None) -> CallBudget:
        """A share of what is left, with the same per-question estimates."""
        return CallBudget(limit, self.most, cached_free=self.cached_free)

    def absorb(self, lane: CallBudget) -> None:
        self.spent += lane.spent
