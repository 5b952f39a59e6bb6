"""Shared LLM steps: those used by more than one strategy or by evaluation. Each strategy's own
steps live beside its program (``netcast.programs.<strategy>.signatures``)."""

from netcast.signatures.answer import ANSWER_TOKENS, FORMAT_TOKENS, AnswerQuestion
from netcast.signatures.contextualize import Contextualize
from netcast.signatures.judge import JudgeAnswer

__all__ = ["ANSWER_TOKENS", "FORMAT_TOKENS", "AnswerQuestion", "Contextualize", "JudgeAnswer"]
