"""What a compile's dev scores show, said plainly under its tables: the paired difference with
its interval and p, whether n can decide anything, and what would."""

from __future__ import annotations

from collections.abc import Mapping

from netcast.evaluation.stats import paired

DECISIVE_N = 150  # the dev questions netcast's own claims are decided on
ALPHA = 0.05


def verdict_lines(
    before: Mapping[str, float | None],
    after: Mapping[str, float | None],
    *,
    compared: str,
    searched: bool,
) -> list[str]:
    """Lines for the end of a compile: ``after`` - ``before`` (per-question dev F1 by question
    id) with its 95% interval and sign-flip p; for fewer than ``DECISIVE_N`` questions, what the
    run does and does not show, and the command that would decide it. ``searched``: the compile
    scored candidates on held-out training questions (a race or a joint compile)."""
    d = paired(after, before)
    if d.n == 0:
        return []
    interval = "" if d.low is None else f" [{d.low:+.3f}, {d.high:+.3f}]"
    lines = [
        f"What this run shows: compiled - {compared}, F1 on the same {d.n} dev questions: "
        f"{d.diff:+.3f}{interval}, sign-flip p = {d.p:.3f}"
        + (" (a difference at p < 0.05)." if d.p < ALPHA else " (no difference shown).")
    ]
    if searched:
        lines.append(
            "The search's scores above are on held-out training questions, the ones it chose "
            "by, so the best of them runs high; the dev scores are on questions it never saw."
        )
    if d.n < DECISIVE_N:
        width = 0.0 if d.low is None else d.high - d.low
        lines.append(
            f"n = {d.n} is a smoke run: it shows the compile works end to end (scored, saved, "
            f"loaded back), not whether it helps: an interval {width:.2f} wide cannot show a "
            "gain of a few F1 points."
        )
        lines.append(
            f"What decides a claim: the same command with --dev-limit {DECISIVE_N} (paired "
            "interval and p on 150 questions), or `netcast bench` on both programs; a "
            "difference counts at p < 0.05."
        )
    return lines
