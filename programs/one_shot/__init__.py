"""One-SHOT (Fishing for Answers §3.1, "cast a bigger net"): the program, its cropping step,
the rule-based metadata filter and crop verification. The knapsack selection it shares with
``combined`` lives in ``netcast.programs.shared.budget``."""

from netcast.programs.one_shot.program import OneShot

__all__ = ["OneShot"]
