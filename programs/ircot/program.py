"""IRCoT (Trivedi, Balasubramanian, Khot and Sabharwal, ACL 2023, "Interleaving Retrieval with
Chain-of-Thought Reasoning for Knowledge-Intensive Multi-Step Questions", arXiv 2212.10509;
code: github.com/StonyBrookNLP/ircot), a baseline.

Retrieve ``k`` paragraphs for the question. Then loop: the reason step writes ONE next sentence
of a chain of thought, given the question, every paragraph collected so far and the sentences
so far (only the first sentence of its reply is kept, as the paper's code keeps spaCy's first);
if that sentence contains "answer is" (the paper's stop rule: the code's
``.* answer is:? (.*)\\.?``), or ``max_steps`` sentences have been written, or the sentence is
empty, the loop stops; else the sentence is the query of ``k`` more paragraphs, of which those
not collected yet join the collection while it holds fewer than ``max_paragraphs``. The reader
then answers from the collected paragraphs.

The reader: the paper's "IRCoT QA" feeds the paragraphs the IRCoT retriever collected to a
separate reader (the ``ircot_qa`` configs: ``answer_main_question`` after the loop), the same
reader its one-step baseline uses, not the answer the chain of thought wrote. So here: a
separate answer step over the collected paragraphs, the shared ``AnswerQuestion`` that
``basic`` answers with (a gain over ``basic`` is then the retrieval's). ``reader`` picks its
prompting: ``direct`` (default), as the code's configs for every Flan-T5 size (0.25B to 11B,
the paper's small models) use; ``cot``, as its Codex configs use. The answer the chain of
thought stated is kept in the prediction (``cot_answer``) and the trace, not used.

Defaults: ``k`` = 6 (every ``base_configs/ircot_qa_*.jsonnet``'s ``bm25_retrieval_count``; the
paper tunes K over {2, 4, 6, 8} per dataset and model on dev, ``run.py``'s grid, which
``k``'s range holds: the joint compile's grid for it is exactly those four);
``max_paragraphs`` = 15 (the configs' ``global_max_num_paras``); ``max_steps`` = 8 (the
paper's limit on reasoning steps; the released code's ``max_num_sentences`` defaults to 10 and
no config sets it).

Deviations: the reason step is a typed Signature with an instruction (the paper prompts with
demonstrations only; compile or ``--teacher annotations`` adds them); paragraphs already
collected are recognised by chunk id (the code compares titles and texts); the query is the
sentence as written (the code strips wh-words from it first); paragraphs are not cut to 350
words; an unreadable reason step ends the loop (counted as a fallback of ``reason``), as an
empty sentence does in the code.
"""

from __future__ import annotations

import re
from typing import Literal

import dspy
from dspy.utils.exceptions import AdapterParseError

from netcast import trace
from netcast.programs import knobs
from netcast.programs.base import NetcastProgram
from netcast.programs.ircot.signatures import NextSentence
from netcast.programs.registry import register
from netcast.programs.shared import annotations
from netcast.signatures import ANSWER_TOKENS, AnswerQuestion

# the paper's stop rule ("answer is", optionally with a colon) and the answer after it
ANSWER_IS = re.compile(r"\banswer is:?\s*(.*)", re.IGNORECASE | re.DOTALL)


def first_sentence(text: str) -> tuple[str, bool]:
    """The first sentence of ``text`` (whitespace collapsed), and whether more followed."""
    parts = annotations.sentences(" ".join(str(text).split()))
    return (parts[0] if parts else ""), len(parts) > 1


def stated_answer(sentence: str) -> str | None:
    """The answer a sentence states after "answer is" (its last full stop dropped), or None."""
    found = ANSWER_IS.search(sentence)
    if found is None:
        return None
    return found.group(1).strip().removesuffix(".").strip()


def _names(text: str, phrase: str) -> bool:
    """``phrase`` occurs in ``text`` as whole words, case aside."""
    pattern = rf"(?<!\w){re.escape(phrase.strip())}(?!\w)"
    return bool(phrase.strip()) and re.search(pattern, text, re.IGNORECASE) is not None


@register
class IRCoT(NetcastProgram):
    name = "ircot"
    knobs: Knobs  # the checked knobs (the model below), read as self.knobs.<name>

    class Knobs(knobs.Knobs):
        # paragraphs a retrieval returns (K): the configs' 6; the paper's grid is {2, 4, 6, 8}
        k: int = knobs.knob(6, search=knobs.IntRange(2, 8), ge=1)
        # reason steps (sentences) at most: the paper's 8
        max_steps: int = knobs.knob(8, search=knobs.IntRange(1, 8), ge=1)
        # paragraphs collected at most (the code's global_max_num_paras); a context limit, not
        # one of the paper's tuned settings: no search range
        max_paragraphs: int = knobs.knob(15, ge=1)
        # the reader's prompting (the module docstring): Flan-T5's direct, or Codex's CoT
        reader: Literal["direct", "cot"] = knobs.knob(
            "direct", search=knobs.Choice(("direct", "cot"))
        )

    def __init__(self, retriever=None, *, lm=None, **knob_values):
        super().__init__(retriever, lm=lm, **knob_values)
        self.reason = dspy.Predict(NextSentence)
        if self.knobs.reader == "cot":
            self.answer = dspy.ChainOfThought(AnswerQuestion)
        else:  # a short span: the output is capped (reasoning, when on, is not)
            self.answer = dspy.Predict(AnswerQuestion, max_tokens=ANSWER_TOKENS)

    def forward(self, question: str) -> dspy.Prediction:
        k, cap = self.knobs.k, self.knobs.max_paragraphs
        session = self.search_session(question)
        record = trace.current()
        collected: dict[str, str] = {}  # chunk id -> paragraph, in the order collected

        def retrieve(query: str) -> dict:
            hits = session.search(query, k)
            added = []
            for hit, paragraph in zip(hits, self.passages(hits), strict=True):
                if hit.chunk.id not in collected and len(collected) < cap:
                    collected[hit.chunk.id] = paragraph
                    added.append(hit.chunk.id)
            return {"query": query, "returned": [h.chunk.id for h in hits], "added": added}

        first = retrieve(question)
        if record is not None:
            record.add_turn(turn=0, action="search", sentence=None, **first)
        cot: list[str] = []
        cot_answer, stopped = None, "limit"
        for step in range(1, self.knobs.max_steps + 1):
            try:
                out = self.reason(
                    context=list(collected.values()), question=question, reasoning_so_far=list(cot)
                )
                sentence, trimmed = first_sentence(out.next_sentence or "")
            except AdapterParseError:
                trace.count("reason", "fallbacks")  # reads what it has collected
                sentence, trimmed, stopped = "", False, "unparsed"
            if not sentence:  # unreadable, or empty: the code's exit on an empty generation
                stopped = "unparsed" if stopped == "unparsed" else "empty"
                if record is not None:
                    record.add_turn(turn=step, action=stopped, sentence=None, query=None)
                break
            cot.append(sentence)
            cot_answer = stated_answer(sentence)
            if cot_answer is not None or step == self.knobs.max_steps:
                stopped = "answer" if cot_answer is not None else "limit"
                if record is not None:
                    record.add_turn(
                        turn=step,
                        action=stopped,
                        sentence=sentence,
                        trimmed=trimmed,
                        query=None,
                        cot_answer=cot_answer,
                    )
                break
            searched = retrieve(sentence)
            if record is not None:
                record.add_turn(
                    turn=step, action="search", sentence=sentence, trimmed=trimmed, **searched
                )
        context = list(collected.values())
        answer = self.answer(context=context, question=question).answer
        return dspy.Prediction(
            answer=answer,
            evidence=list(collected),
            context=context,
            cot=cot,
            cot_answer=cot_answer or "",
            stopped=stopped,
        )

    def annotated_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """From the record's annotations, when every gold passage has supporting sentences
        (HotpotQA's annotated ones; MuSiQue's, those of each hop's paragraph holding the hop's
        answer: ``netcast.data.records.hop_facts``): the gold passages are put in chain
        order (``chain_order``: the one whose supporting sentences name another gold
        passage's title, the bridge entity, first).
        ``reason`` gets two demonstrations: its first step, over the top-``k`` retrieved for
        the question (the first gold passage swapped in for the last other if retrieval
        missed it), writes that passage's supporting sentence naming the bridge entity (else
        its first supporting sentence); its last step, with that sentence and then every other
        supporting sentence, in chain order, as the reasoning so far (the first
        ``max_steps`` - 1 of them: the loop writes no more before its last step; none with
        ``max_steps`` 1, which teaches the first step only), over the paragraphs the
        loop would hold after searching each of them in turn (the top-``k`` of each, new ones
        only, up to the cap; every gold passage swapped in), writes "So the answer is: <gold
        answer>." ``answer`` gives the gold answer from those paragraphs. Not
        taught: the middle steps (one sentence per gold fact; only the first and the last are
        demonstrated), sentences in the model's own words (the demonstrations' are the
        dataset's supporting sentences, verbatim), and ``reason`` at all for a record where a
        gold passage has no supporting sentence, which teaches ``answer`` only (over the
        question's top-``k`` with the gold swapped in)."""
        gold = annotations.require(example, "gold_passages", self.name)
        question, k, cap = example.question, self.knobs.k, self.knobs.max_paragraphs
        hits = self.retriever.search(question, k)
        found = [(h.chunk.id, p) for h, p in zip(hits, self.passages(hits), strict=True)][:cap]
        chain = self.chain_order(example)
        facts = [annotations.supporting_sentences(p) for p in chain]
        demos: dict[str, list[dspy.Example]] = {}
        if all(facts):
            lead, others = chain[0], [p["title"] for p in chain[1:]]
            leads = annotations.sentences(facts[0])
            bridge = next((s for s in leads if any(_names(s, t) for t in others)), leads[0])
            shown = annotations.context_with_gold(found, [lead], len(found))
            every = [s for text in facts for s in annotations.sentences(text)]
            # the loop writes its answer sentence at step max_steps at the latest
            so_far = [bridge, *(s for s in every if s != bridge)][: self.knobs.max_steps - 1]
            collected = dict(found)
            for sentence in so_far:  # the loop searches each sentence it writes
                more = self.retriever.search(sentence, k)
                for hit, paragraph in zip(more, self.passages(more), strict=True):
                    if hit.chunk.id not in collected and len(collected) < cap:
                        collected[hit.chunk.id] = paragraph
            held = list(collected.items())
            context = annotations.context_with_gold(held, gold, len(held))
            demos["reason"] = [self._reason_demo(shown, question, [], bridge)]
            if so_far:  # with max_steps 1 the first sentence is the last
                last = f"So the answer is: {example.answer}."
                demos["reason"].append(self._reason_demo(context, question, so_far, last))
        else:
            context = annotations.context_with_gold(found, gold, len(found))
        final = dspy.Example(context=context, question=question, answer=example.answer)
        demos["answer"] = [final.with_inputs("context", "question")]
        return demos

    @staticmethod
    def chain_order(example: dspy.Example) -> list[dict]:
        """The gold passages in reasoning order: ``annotations.gold_queries``'s (MuSiQue's hop
        order); without hops (HotpotQA), a passage whose supporting sentences (or, without
        them, text) name another gold passage's title (the bridge entity) comes first."""
        ordered = [p for p, _ in annotations.gold_queries(example)]
        if example.get("hops"):
            return ordered

        def names_another(passage: dict) -> bool:
            text = annotations.supporting_sentences(passage) or passage["text"]
            return any(_names(text, o["title"]) for o in ordered if o["id"] != passage["id"])

        return sorted(ordered, key=lambda p: not names_another(p))

    @staticmethod
    def _reason_demo(context: list[str], question: str, so_far: list[str], sentence: str):
        return dspy.Example(
            context=context, question=question, reasoning_so_far=so_far, next_sentence=sentence
        ).with_inputs("context", "question", "reasoning_so_far")
