"""IterKey (Iterative Keyword Generation with LLMs for Enhanced RAG): generate BM25 keywords (step
1), retrieve with question + keywords and answer (step 2), validate the answer True/False (step
3), regenerate keywords from the previous ones (step 4); repeat steps 2-4 until the answer
validates or ``max_steps``. Validation reads the model's True/False output (``text``) or
compares the probabilities of "True" and "False" as the next token (``logprobs``, forced
decoding) against ``threshold``. The forced-decoding verdict is recorded in DSPy's trace as a
Predict call is, so a compile gives ``validate_next_token`` demonstrations of its own, which
then enter its prompt; the text and logprobs validators are separate predictors, so compile in
the mode you will run. Variants from the appendices: ``doc_by_doc`` regenerates keywords from
each retrieved document separately (Table 10), ``cot`` validates and regenerates with chain-of-
thought (Table 16); IterKey over a dense retriever (Table 6) is this program given a dense
retriever.

``stop_when_valid=False`` is the setting of the paper's Table 9 (§4.4: "we iterated up to five
times, including after a 'True' judgment"): the loop runs all ``max_steps`` iterations, every
iteration's answer and verdict are in the trace's turns, and the answer returned is still the
first validated one (the paper's 'Base'), so one run gives Base, VerifiedTrue and VerifiedAll."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Literal

import dspy
from bm25s.stopwords import STOPWORDS_EN_PLUS
from dspy.utils.exceptions import AdapterParseError

from netcast import trace
from netcast.programs import knobs
from netcast.programs.base import NetcastProgram
from netcast.programs.iterkey.forced import p_true
from netcast.programs.iterkey.signatures import (
    AnswerFromDocuments,
    GenerateKeywords,
    RegenerateKeywords,
    RegenerateKeywordsFromDocument,
    ValidateAnswer,
)
from netcast.programs.registry import register
from netcast.programs.shared import annotations
from netcast.programs.shared.lists import parse_list
from netcast.signatures import FORMAT_TOKENS

VARIANTS = ("standard", "doc_by_doc", "cot")


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"\w+", text.lower()) if w not in STOPWORDS_EN_PLUS}


def question_keywords(question: str, taken: Iterable[str] = ()) -> list[str]:
    """The question's words that are no stopwords nor words of ``taken``, in order, once."""
    skip = set(STOPWORDS_EN_PLUS) | {w for t in taken for w in content_words(t)}
    words = [w for w in re.findall(r"\w[\w'-]*", question) if w.lower() not in skip]
    return list(dict.fromkeys(words))


def keywords_of(raw: object) -> list[str]:
    """Keywords a model wrote: a JSON list, or text separated by commas, semicolons or lines."""
    return parse_list(raw, separators="\n,;")


@register
class IterKey(NetcastProgram):
    name = "iterkey"
    knobs: Knobs  # the checked knobs (the model below), read as self.knobs.<name>

    class Knobs(knobs.Knobs):
        # iterations at most (the paper's max iterations; ``max_iters`` is an alias)
        max_steps: int = knobs.knob(5, search=knobs.IntRange(1, 5), ge=1, aliases=("max_iters",))
        k: int = knobs.knob(3, search=knobs.IntRange(1, 10), ge=1)
        # the paper validates by the higher probability of "True" or "False" as the next
        # token (forced decoding, "logprobs"); "text" reads the model's written verdict
        validation: Literal["text", "logprobs"] = knobs.knob(
            "logprobs", search=knobs.Choice(("text", "logprobs"))
        )
        # P(True) needed in logprobs mode; small models lean to False
        threshold: float = knobs.knob(0.5, search=knobs.FloatRange(0.05, 0.95), ge=0.0, le=1.0)
        # nothing validated: the "last" answer or the "best" P(True) one
        on_fail: Literal["last", "best"] = knobs.knob("last", search=knobs.Choice(("last", "best")))
        variant: Literal["standard", "doc_by_doc", "cot"] = knobs.knob(
            "standard", search=knobs.Choice(VARIANTS)
        )
        # False: keep iterating after a True up to max_steps (Table 9); the answer returned
        # is still the first validated one
        stop_when_valid: bool = True

    def __init__(self, retriever=None, *, lm=None, **knob_values):
        super().__init__(retriever, lm=lm, **knob_values)
        cot = self.knobs.variant == "cot"
        # the paper's output limits per step (Table 14: keywords 50, answer 50, validation 30
        # tokens), plus what DSPy's field markers take; chain-of-thought steps are not capped
        keywords, answer, validation = (limit + FORMAT_TOKENS for limit in (50, 50, 30))
        self.generate = dspy.Predict(GenerateKeywords, max_tokens=keywords)
        self.answer = dspy.Predict(AnswerFromDocuments, max_tokens=answer)
        if cot:
            self.validate = dspy.ChainOfThought(ValidateAnswer)  # text mode
            self.regenerate = dspy.ChainOfThought(RegenerateKeywords)
        else:
            self.validate = dspy.Predict(ValidateAnswer, max_tokens=validation)
            self.regenerate = dspy.Predict(RegenerateKeywords, max_tokens=keywords)
        self.validate_next_token = dspy.Predict(ValidateAnswer)  # logprobs mode
        self.regenerate_from_document = dspy.Predict(
            RegenerateKeywordsFromDocument, max_tokens=keywords
        )

    def annotated_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """From the record's annotations: ``generate`` writes the gold passages' titles (less
        a bracketed qualifier) and the question's other keywords, as a JSON list; ``answer``
        gives the gold answer from the top-``k`` retrieved with the question and those
        keywords (gold passages swapped in for the last others where retrieval missed them);
        ``validate`` and ``validate_next_token`` judge, over those documents, the gold answer
        True and a wrong one False (the title of the first document that is not gold and
        shares no word with a gold answer, when there is one); ``regenerate`` turns the
        question's own keywords into those keywords when the question's keywords miss a gold
        passage. Not taught: ``regenerate_from_document`` (which terms one document suggests
        is not in the record), and the ``cot`` variant's reasoning (the demos have none)."""
        gold = annotations.require(example, "gold_passages", self.name)
        question, k = example.question, self.knobs.k
        titles = list(dict.fromkeys(re.sub(r"\s*\([^)]*\)\s*$", "", p["title"]) for p in gold))
        keywords = titles + question_keywords(question, titles)
        written = json.dumps(keywords, ensure_ascii=False)
        hits = self.retriever.search(" ".join([question, *keywords]), k)
        found = [(h.chunk.id, p) for h, p in zip(hits, self.passages(hits), strict=True)]
        shown = annotations.marked_context_with_gold(found, gold, k)
        documents = [text for text, _ in shown]
        # a wrong answer: the title of a document that is not gold and shares no word with
        # a gold answer
        golds = [example.answer, *(example.get("answers") or [])]
        answer_words = set().union(*map(content_words, golds))
        titles_shown = {text: h.chunk.title for h, (_, text) in zip(hits, found, strict=True)}
        wrong = [
            titles_shown[text]
            for text, source in shown
            if source is None and not content_words(titles_shown[text]) & answer_words
        ]
        verdicts = [(example.answer, True)] + [(title, False) for title in wrong[:1]]
        validate = [
            dspy.Example(
                question=question, documents=documents, answer=answer, is_correct=verdict
            ).with_inputs("question", "documents", "answer")
            for answer, verdict in verdicts
        ]
        demos = {
            "generate": [dspy.Example(question=question, keywords=written).with_inputs("question")],
            "answer": [
                dspy.Example(
                    context=documents, question=question, answer=example.answer
                ).with_inputs("context", "question")
            ],
            "validate": validate,
            "validate_next_token": list(validate),
        }
        previous = question_keywords(question)
        reached = self.retriever.search(" ".join([question, *previous]), k)
        if {p["id"] for p in gold} - {h.chunk.doc_id for h in reached}:
            demos["regenerate"] = [
                dspy.Example(
                    question=question, previous_keywords=previous, keywords=written
                ).with_inputs("question", "previous_keywords")
            ]
        return demos

    def step_adapter(self, step: str, adapter: dspy.Adapter) -> dspy.Adapter:
        """``validate_next_token`` is read as the token after its output field's header, so
        it is always formatted by DSPy's ChatAdapter (training included); the other steps by
        ``adapter``."""
        return dspy.ChatAdapter() if step == "validate_next_token" else adapter

    def check(self, question: str, answer: str, documents: list[str]) -> tuple[bool, float]:
        """(validated, P(True)); in text mode P(True) is 1.0 or 0.0."""
        if self.knobs.validation == "logprobs":
            predictor = self.validate_next_token
            inputs = {"question": question, "documents": documents, "answer": answer}
            # the predictor's demos (a compile's) enter the prompt as in any DSPy step
            adapter = self.step_adapter("validate_next_token", dspy.settings.adapter)
            messages = adapter.format(predictor.signature, predictor.demos, inputs)
            lm = predictor.lm or dspy.settings.lm  # the program's own LM (set_lm), if bound
            p = p_true(lm, messages, "[[ ## is_correct ## ]]\n")
            if p is None:  # neither verdict among the model's next tokens: nothing validates
                trace.count("validate_next_token", "fallbacks")
            verdict = p is not None and p >= self.knobs.threshold
            if dspy.settings.trace is not None:
                # recorded as Predict records its calls, so a compile (BootstrapFewShot and the
                # optimizers built on it) can turn a successful verdict into a demonstration
                outputs = dspy.Prediction(is_correct=verdict)
                dspy.settings.trace.append((predictor, inputs, outputs))
            return verdict, p or 0.0
        try:
            verdict = bool(
                self.validate(question=question, documents=documents, answer=answer).is_correct
            )
        except AdapterParseError:
            trace.count("validate", "fallbacks")
            verdict = False  # an unreadable verdict does not validate
        return verdict, float(verdict)

    def next_keywords(self, question: str, keywords: list[str], documents: list[str]):
        if self.knobs.variant == "doc_by_doc":
            found: list[str] = []
            for document in documents:
                out = self.regenerate_from_document(
                    question=question, previous_keywords=keywords, document=document
                )
                found += keywords_of(out.keywords)
            return keywords_of(found)
        return keywords_of(self.regenerate(question=question, previous_keywords=keywords).keywords)

    def forward(self, question: str) -> dspy.Prediction:
        knobs = self.knobs
        record = trace.current()
        keywords = keywords_of(self.generate(question=question).keywords)
        seen_keywords: set[str] = set()
        seen_docs: set[str] = set()
        tries = []
        for iteration in range(1, knobs.max_steps + 1):
            hits = self.search(" ".join([question, *keywords]), knobs.k)
            documents = self.passages(hits)
            answer = self.answer(context=documents, question=question).answer
            valid, probability = self.check(question, answer, documents)
            ids = [h.chunk.id for h in hits]
            new_keywords = [k for k in keywords if k.lower() not in seen_keywords]
            new_docs = [i for i in ids if i not in seen_docs]
            seen_keywords.update(k.lower() for k in keywords)
            seen_docs.update(ids)
            if record is not None:
                record.add_turn(
                    iteration=iteration,
                    keywords=keywords,
                    new_keywords=new_keywords,
                    retrieved=ids,
                    new_docs=new_docs,
                    answer=answer,
                    valid=valid,
                    p_true=probability,
                )
            tries.append((answer, probability, ids, documents, valid))
            if valid and knobs.stop_when_valid:
                break
            if iteration < knobs.max_steps:
                keywords = self.next_keywords(question, keywords, documents)
        first_valid = next((i for i, t in enumerate(tries) if t[4]), None)
        validated = first_valid is not None
        if validated:
            answer, _, ids, documents, _ = tries[first_valid]
        elif knobs.on_fail == "last":
            answer, _, ids, documents, _ = tries[-1]
        else:  # the most probable answer; among equals (text mode: all 0.0) the latest
            best = max(range(len(tries)), key=lambda i: (tries[i][1], i))
            answer, _, ids, documents, _ = tries[best]
        return dspy.Prediction(
            answer=answer,
            evidence=ids,
            context=documents,
            validated=validated,
            iterations=len(tries),
        )
