"""Iterative agentic retrieval ("cast a small net many times", Fishing for Answers §3.2, Fig. 3)
and the combined strategy (§4.4).

Each turn the model decides whether further retrieval is required. If so it writes a query;
the system retrieves the top-k chunks (on the first search also the original question's:
the fallback search against query drift, §3.2.3); the chunk_delete step drops the retrieved
chunks the model judges irrelevant, and the rest are appended to the working context. Deleting
is part of the retrieval step (Fig. 3: Retrieved Chunks -> Chunk Delete -> Highly Relevant
Chunks -> Context Append), so it spends no turn. At ``max_steps``, or when the model says
"answer", the final answer is written from the working context and the agent's notes (its
reasoning at each turn: in the paper the reasoning model answers in the same stream). The agent
always retrieves before answering: a first decision to answer from an empty context becomes a
search for the question (``search_first``; counted as a fallback of ``decide``).

``combined`` (§4.4) replaces the fallback's top-k for the original question with the
token-budgeted Top-K_max selection.

A deletion that names every chunk of a retrieval is rejected by default (counted as a rejected
``delete_chunks`` check; nothing is dropped): told to list the chunks to drop, the 0.5B embedded
model listed them all (252 of 259 retrieved chunks deleted on 40 HotpotQA dev questions, 38 of
them answered from an empty context). ``allow_delete_all=True`` is the paper's rule.
``delete_signal`` adds a score threshold beside the model's deletion (``programs.shared.rerank``:
a chunk scored below ``delete_below`` times the retrieval's best is dropped too; the best never
is, nor, unless allowed, every chunk of a retrieval); off by default (the paper's deletion is the
model's alone). ``links`` adds to each retrieval up to that many passages its chunks name by title
(``programs.shared.links``), which chunk_delete then judges with the rest; off by default.

The working context is program state: chunks under short labels ([C1], [C2], ...); chunks just
retrieved are shown to chunk_delete as [N1], [N2], ... and a deletion can only name those. The
model only ever names labels, and nothing in a chunk's text is ever parsed as an action."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import dspy
from dspy.utils.exceptions import AdapterParseError

from netcast import trace
from netcast.corpus import Chunk, doc_id_of_chunk, format_passage
from netcast.programs import knobs
from netcast.programs.base import NetcastProgram
from netcast.programs.iterative.signatures import DeleteChunks, FinalAnswer, NextAction
from netcast.programs.registry import register
from netcast.programs.shared import annotations
from netcast.programs.shared.budget import (
    budgeted_hits,
    candidate_hits,
    default_token_budget,
    relevance,
)
from netcast.programs.shared.rerank import relevance_scores
from netcast.programs.shared.search import SearchSession
from netcast.retrievers.base import Hit
from netcast.signatures import ANSWER_TOKENS, Contextualize

BOOL = knobs.Choice((False, True))


class WorkingContext:
    """Chunks by label, in the order they entered; each chunk at most once."""

    def __init__(self) -> None:
        self.by_label: dict[str, Chunk] = {}
        self._labels: dict[str, str] = {}  # chunk id -> label
        self._next = 1

    def __contains__(self, chunk_id: str) -> bool:
        return chunk_id in self._labels

    def add(self, chunk: Chunk) -> str | None:
        """The new label, or ``None`` if the chunk is already in the context."""
        if chunk.id in self._labels:
            return None
        label = f"C{self._next}"
        self._next += 1
        self.by_label[label] = chunk
        self._labels[chunk.id] = label
        return label

    def ids(self) -> list[str]:
        return [c.id for c in self.by_label.values()]

    def passages(self) -> list[str]:
        return [format_passage(c.title, c.text) for c in self.by_label.values()]

    def labelled(self) -> list[str]:
        return [
            f"[{label}] {format_passage(c.title, c.text)}" for label, c in self.by_label.items()
        ]

    def tokens(self) -> int:
        return sum(c.n_tokens for c in self.by_label.values())


def new_labels(count: int) -> list[str]:
    """The labels chunk_delete sees on ``count`` chunks just retrieved: N1, N2, ..."""
    return [f"N{i}" for i in range(1, count + 1)]


def labelled_new(hits: list[Hit]) -> dict[str, Hit]:
    """The chunks just retrieved under their labels (``new_labels``)."""
    return dict(zip(new_labels(len(hits)), hits, strict=True))


def delete_signature(
    signature: type[dspy.Signature], labels: Sequence[str], adapter: dspy.Adapter | None
) -> type[dspy.Signature]:
    """chunk_delete's signature for a retrieval labelled ``labels``: under a JSON schema
    (``dspy.JSONAdapter``) the ids it may name are those labels (a Literal; constrained
    decoding allows nothing else, e.g. no copied chunk text); a free-text reply keeps
    list[str], read tolerantly by ``chosen_labels``."""
    if not isinstance(adapter, dspy.JSONAdapter):
        return signature
    names = tuple(labels) + tuple(f"[{label}]" for label in labels)
    return signature.with_updated_fields("delete_ids", type_=list[Literal[names]])


def chosen_labels(raw: list[str], labels: dict[str, Hit]) -> list[str]:
    """The labels in ``raw`` that name a chunk just retrieved (``[N2]``, ``n2`` -> ``N2``)."""
    found = []
    for item in raw:
        label = str(item).strip().strip("[]").upper()
        if label in labels and label not in found:
            found.append(label)
    return found


def with_others(hits: list[Hit], more: list[Hit]) -> list[Hit]:
    """``hits``, then those of ``more`` it does not hold (a first round's fallback)."""
    seen = {h.chunk.id for h in hits}
    return hits + [h for h in more if h.chunk.id not in seen]


def with_gold(
    found: list[tuple[str, str]], passage: dict, gold: list[dict]
) -> list[tuple[str, str]]:
    """The (chunk id, passage) pairs a search ``found``, ``passage`` (one of the annotations'
    ``gold`` passages) swapped in for the last hit that is not gold where the search missed it
    (added after them where every hit is gold)."""
    if passage["id"] in {doc_id_of_chunk(cid) for cid, _ in found}:
        return found
    (text,) = annotations.gold_passage_texts([passage])
    others = [i for i, (cid, _) in enumerate(found) if not annotations.is_gold(cid, gold)]
    kept = [pair for i, pair in enumerate(found) if not others or i != others[-1]]
    return [*kept, (f"{passage['id']}#0", text)]


def search_note(query: str, kept: int, dropped: int) -> str:
    """A search's line in the agent's history, as its decision step reads it."""
    return f"search {query!r}: kept {kept} new chunks, dropped {dropped}"


def delete_demo(
    question: str, retrieved: list[str], drop: list[str], context: Sequence[str] = ()
) -> dspy.Example:
    """chunk_delete's demonstration: the passages just retrieved (labelled N1, N2, ... as the
    agent shows them) beside the passages of the ``context`` it holds (labelled C1, C2, ...;
    empty on the first round) and the labels ``drop`` it deletes."""
    return dspy.Example(
        question=question,
        context=[f"[C{i}] {text}" for i, text in enumerate(context, 1)],
        retrieved=[
            f"[{label}] {text}"
            for label, text in zip(new_labels(len(retrieved)), retrieved, strict=True)
        ],
        delete_ids=drop,
    ).with_inputs("question", "context", "retrieved")


def decision_demo(
    question: str, kept: list[str], history: list[str], action: str, query: str
) -> dspy.Example:
    """The decision step's demonstration over a context of passages ``kept`` (labelled C1,
    C2, ...) after the searches ``history`` notes."""
    return dspy.Example(
        question=question,
        context=[f"[C{i}] {text}" for i, text in enumerate(kept, 1)],
        history=history,
        action=action,
        query=query,
    ).with_inputs("question", "context", "history")


def answer_demo(question: str, context: list[str], answer: str) -> dspy.Example:
    return dspy.Example(context=context, notes=[], question=question, answer=answer).with_inputs(
        "context", "notes", "question"
    )


@register
class Iterative(NetcastProgram):
    name = "iterative"
    knobs: Knobs  # the checked knobs (the model below), read as self.knobs.<name>

    class Knobs(knobs.Knobs):
        # decisions at most (the paper's max turns; ``max_turns`` is an alias)
        max_steps: int = knobs.knob(5, search=knobs.IntRange(1, 8), ge=1, aliases=("max_turns",))
        k: int = knobs.knob(5, search=knobs.IntRange(1, 10), ge=1)
        # also search the original question on the first search (§3.2.3)
        fallback: bool = knobs.knob(True, search=BOOL)
        # chunk_delete: drop irrelevant chunks from each retrieval before they enter the context
        delete: bool = knobs.knob(True, search=BOOL)
        # False: a deletion naming every chunk of a retrieval is rejected (nothing is dropped);
        # True is the paper's rule (see the module docstring)
        allow_delete_all: bool = False
        reasoning: bool = True  # reason before each decision (ChainOfThought)
        notes: bool = True  # the final answer sees the agent's reasoning
        search_first: bool = True  # an empty context never answers: search the question first
        # a query searched before finds nothing new (without de-dup): answer instead of
        # spending the turn (small models repeat their query; counted as a decide fallback)
        stop_on_repeat: bool = True
        # "budget": the first round's fallback is the Top-K_max selection (§4.4, combined)
        initial: Literal["none", "budget"] = "none"
        # for initial="budget"; None: a quarter of the model's context window
        token_budget: int | None = knobs.knob(None, ge=1)
        # candidates the budget selects from; None: two budgets' worth of tokens
        pool_size: int | None = knobs.knob(None, ge=1)
        dedup: bool = False  # test-time modules (netcast.programs.shared.search)
        contextualize: bool = False
        aux_model: str | None = None
        # a score threshold beside the model's own deletion: with a programs.shared.rerank
        # signal, a chunk just retrieved whose score is below delete_below times the best of
        # its retrieval is dropped too (the best never is); None: the model's deletion only
        delete_signal: knobs.OptionalSignal = None
        delete_below: float = knobs.knob(0.5, ge=0.0, le=1.0)
        # the link hop of each search (programs.knobs); no search range yet: unmeasured here
        links: knobs.Links = 0

    def __init__(self, retriever=None, *, lm=None, **knob_values):
        super().__init__(retriever, lm=lm, **knob_values)
        step = dspy.ChainOfThought if self.knobs.reasoning else dspy.Predict
        self.decide = step(NextAction)
        self.delete_chunks = dspy.Predict(DeleteChunks)
        self.answer = dspy.Predict(FinalAnswer, max_tokens=ANSWER_TOKENS)
        self.contextualize = dspy.Predict(Contextualize)

    def next_action(
        self, question: str, context: WorkingContext, history: list[str], memory=()
    ) -> dict:
        """The model's decision as data: action, query, reasoning (``action="unparsed"`` if
        the reply could not be read). ``memory`` notes are shown after the chunks."""
        shown = context.labelled() + [f"[memory] {note}" for note in memory]
        try:
            out = self.decide(question=question, context=shown, history=history)
        except AdapterParseError as err:
            trace.count("decide", "fallbacks")  # answers with the context it has
            return {"action": "unparsed", "query": "", "reasoning": "", "error": str(err)[:200]}
        return {
            "action": str(out.action),
            "query": str(getattr(out, "query", "") or "").strip(),
            "reasoning": str(getattr(out, "reasoning", "") or "").strip(),
        }

    def fallback_hits(self, question: str, session) -> list[Hit]:
        """The first round's retrieval for the original question: its top-k, or (``combined``)
        the Top-K_max selection within the token budget."""
        if self.knobs.initial != "budget":
            return session.search(question, self.knobs.k)
        budget = int(self.knobs.token_budget or default_token_budget(self.context_window))
        corpus = self.retriever.corpus
        pool = candidate_hits(session.search, question, corpus, budget, self.knobs.pool_size)
        return budgeted_hits(pool, self.retriever.kind, budget)

    def first_round(self, question: str, session: SearchSession) -> list[Hit]:
        """What the first round puts before chunk_delete when its search is the question (as
        ``search_first`` makes it): the question's top-``k`` and, with ``fallback``, the
        fallback retrieval's others (``combined``: its budgeted selection), searched through
        ``session`` as the run searches. For the annotation teacher."""
        hits = session.search(question, self.knobs.k)
        if self.knobs.fallback:
            hits = with_others(hits, self.fallback_hits(question, session))
        return hits

    def filter_new(self, question: str, context: WorkingContext, hits: list[Hit]) -> list[str]:
        """chunk_delete over the chunks just retrieved (and ``delete_signal``'s threshold beside
        it): the ids of those it drops."""
        labels = labelled_new(hits)
        shown = [
            f"[{label}] {format_passage(h.chunk.title, h.chunk.text)}"
            for label, h in labels.items()
        ]
        signature = delete_signature(
            self.delete_chunks.signature, list(labels), dspy.settings.adapter
        )
        try:
            raw = self.delete_chunks(
                signature=signature,
                question=question,
                context=context.labelled(),
                retrieved=shown,
            ).delete_ids
        except AdapterParseError:
            trace.count("delete_chunks", "fallbacks")  # keep every retrieved chunk
            return self.below_threshold(question, hits)[0]
        chosen = chosen_labels(list(raw or []), labels)
        below, best = self.below_threshold(question, hits)
        if labels and len(chosen) == len(labels) and not self.knobs.allow_delete_all:
            trace.check("delete_chunks", False, "deletes every chunk just retrieved")
            trace.withhold_demo(self.delete_chunks)  # not a demonstration to bootstrap
            return below
        trace.check("delete_chunks", True)
        deleted = [labels[label].chunk.id for label in chosen]
        deleted += [cid for cid in below if cid not in deleted]
        if len(deleted) == len(hits) and not self.knobs.allow_delete_all:
            deleted.remove(best)  # the model dropped the signal's best, the scores the rest
        return deleted

    def below_threshold(self, question: str, hits: list[Hit]) -> tuple[list[str], str | None]:
        """With ``delete_signal``: the ids of the chunks just retrieved whose score is below
        ``delete_below`` times the best (``relevance_scores``; a ``rerank`` stage of the
        trace), never the best one, and the best one's id; without: nothing."""
        signal = self.knobs.delete_signal
        if signal is None or not hits:
            return [], None
        lm = self.own_lm()
        values = relevance(relevance_scores(question, hits, signal, lm=lm), "score")
        best = max(range(len(hits)), key=lambda i: values[i])
        drops = [
            h.chunk.id
            for i, h in enumerate(hits)
            if values[i] < self.knobs.delete_below and i != best
        ]
        return drops, hits[best].chunk.id

    def forward(self, question: str) -> dspy.Prediction:
        knobs = self.knobs
        record = trace.current()  # written to only: no decision reads it
        context = WorkingContext()
        session = self.search_session(question, self.contextualize)
        history: list[str] = []
        notes: list[str] = []
        searched = False
        for turn in range(1, knobs.max_steps + 1):
            decision = self.next_action(question, context, history, session.memory)
            if decision["reasoning"]:
                notes.append(decision["reasoning"])
            action, query, forced = decision["action"], decision["query"], False
            if action != "search" and not searched and knobs.search_first:
                action, query, forced = "search", question, True
                trace.count("decide", "fallbacks")
            if (
                action == "search"
                and knobs.stop_on_repeat
                and not knobs.dedup
                and (query or question) in session.queries
            ):
                action = "answer"
                trace.count("decide", "fallbacks")
            step = {"turn": turn, "action": action, "forced": forced, "query": None}
            if action == "search":
                query = query or question
                hits = session.search(query, knobs.k)
                if knobs.fallback and not searched:  # guard against query drift (first round)
                    hits = with_others(hits, self.fallback_hits(question, session))
                searched = True
                new = [h for h in hits if h.chunk.id not in context]
                deleted = self.filter_new(question, context, new) if knobs.delete and new else []
                added = [
                    h.chunk.id for h in new if h.chunk.id not in deleted and context.add(h.chunk)
                ]
                step.update(
                    query=query, returned=[h.chunk.id for h in hits], added=added, deleted=deleted
                )
                history.append(search_note(query, len(added), len(deleted)))
            step["context_tokens"] = context.tokens()
            step["context_chunks"] = len(context.by_label)
            if record is not None:
                record.add_turn(**step)
            if action != "search":
                break  # "answer", or an unreadable reply: answer with what we have
        passages = context.passages()
        answer = self.answer(
            question=question,
            context=passages + session.memory,
            notes=notes if knobs.notes else [],
        ).answer
        return dspy.Prediction(answer=answer, evidence=context.ids(), context=passages)

    def annotated_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """The agent's trajectory for the record (``trajectory``) from its first round for
        the question (``first_round``: its top-``k``; ``combined``: with its budgeted
        selection), as retrieval ranks it. Every search of the trajectory goes through one
        ``replay_session``: the run's link hop and de-duplication, as the agent meets them."""
        session = self.replay_session(example.question)
        return self.trajectory(example, self.first_round(example.question, session), session)

    def retrieved_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """The trajectory of a question whose first round finds no gold passage (RAFT's
        share of examples without the golden document, ``retrieved_share``): ``iterative``:
        the question's top-``k`` that are not gold, the next ones ranked standing in;
        ``combined``: its first round without the gold. Deleting every chunk is refused unless
        ``allow_delete_all``, so they stay beside the evidence the later searches bring (RAFT's
        distractors). The later searches go through a ``replay_session`` as in
        ``annotated_demos``; ``iterative``'s first round without the gold has no link hop."""
        gold = annotations.require(example, "gold_passages", self.name)
        question = example.question
        session = self.replay_session(question)
        if self.knobs.initial == "budget":
            first = self.first_round(question, session)
            hits = [h for h in first if not annotations.is_gold(h.chunk.id, gold)]
        else:
            hits = annotations.top_without_gold(self.retriever.search, question, self.knobs.k, gold)
            session.seen += [h.chunk.id for h in hits]  # what de-duplication leaves out later
        return self.trajectory(example, hits, session)

    def step_signature(
        self, step: str, signature: type[dspy.Signature], demo: dspy.Example, adapter: dspy.Adapter
    ) -> type[dspy.Signature]:
        """chunk_delete runs under the labels of the chunks its demonstration shows
        (``delete_signature``); the other steps under their own."""
        if step != "delete_chunks":
            return signature
        return delete_signature(signature, new_labels(len(demo.retrieved)), adapter)

    def found(self, hits: list[Hit]) -> list[tuple[str, str]]:
        return [(h.chunk.id, p) for h, p in zip(hits, self.passages(hits), strict=True)]

    def trajectory(
        self, example: dspy.Example, first: list[Hit], session: SearchSession
    ) -> dict[str, list[dspy.Example]]:
        """What an expert agent with the record's annotations does, turn by turn, each step's
        demonstration shown what the agent is shown at that turn (no model call):

        1. ``decide`` over the empty context searches the question (its demonstration listed
           last); ``first`` is what that search puts before chunk_delete.
        2. ``delete_chunks`` deletes exactly the chunks just retrieved that are not gold (none
           with ``delete`` off; where none of them is gold, deleting them all is refused unless
           ``allow_delete_all``: they stay and there is no demonstration); the rest join the
           context, and the search's line joins the history.
        3. While a gold passage is missing, ``decide`` searches for the first one missing (by
           its title, or the MuSiQue sub-question it answers: ``annotations.gold_queries``; a
           query already sent is not sent again); the search's top-``k`` through ``session``
           (with the run's link hop and de-duplication), with that passage swapped in for its
           last hit that is not gold where the search missed it, goes through step 2.
        4. Once every gold passage is in (or at ``max_steps`` decisions), ``decide`` answers
           and ``answer`` gives the gold answer from the context.

        Not taught: the reasoning before a decision and the answer's notes (the agent's own
        thoughts: the demos have no reasoning and empty notes), and ``contextualize`` (memory
        notes in the auxiliary model's own words, which no annotation holds)."""
        gold = annotations.require(example, "gold_passages", self.name)
        question, knobs = example.question, self.knobs
        targets = annotations.gold_queries(example)
        demos: dict[str, list[dspy.Example]] = {"delete_chunks": [], "decide": []}
        context: dict[str, str] = {}  # chunk id -> passage, in the order they entered
        history: list[str] = []
        query, queries = question, {question}
        found = self.found(first)
        while True:
            new = [(cid, text) for cid, text in found if cid not in context]
            drop = [
                i
                for i, (cid, _) in enumerate(new)
                if knobs.delete and not annotations.is_gold(cid, gold)
            ]
            if new and len(drop) == len(new) and not knobs.allow_delete_all:
                drop = []  # deleting every chunk just retrieved is refused: they stay
            elif knobs.delete and new:
                retrieved = [text for _, text in new]
                dropped = [new_labels(len(new))[i] for i in drop]
                step = delete_demo(question, retrieved, dropped, list(context.values()))
                demos["delete_chunks"].append(step)
            context |= {cid: text for i, (cid, text) in enumerate(new) if i not in drop}
            history.append(search_note(query, len(new) - len(drop), len(drop)))
            held = {doc_id_of_chunk(cid) for cid in context if annotations.is_gold(cid, gold)}
            missing = [(p, q) for p, q in targets if p["id"] not in held]
            # a query already sent is not sent again (``stop_on_repeat`` makes it an answer)
            fresh = [(p, q) for p, q in missing if q not in queries]
            if not fresh or len(history) >= knobs.max_steps:
                break
            passage, query = fresh[0]
            queries.add(query)
            step = decision_demo(question, list(context.values()), list(history), "search", query)
            demos["decide"].append(step)
            hits = session.search(query, knobs.k)
            found = with_gold(self.found(hits), passage, gold)
        if len(history) < knobs.max_steps:
            passages = list(context.values())
            demos["decide"].append(decision_demo(question, passages, history, "answer", ""))
        # the first decision last: a prompt's first demonstrations (``per_step``) are then the
        # decisions after a search, not the one ``search_first`` forces anyway
        demos["decide"].append(decision_demo(question, [], [], "search", question))
        demos["answer"] = [answer_demo(question, list(context.values()), example.answer)]
        return {step: items for step, items in demos.items() if items}


@register
class Combined(Iterative):
    """The combined strategy (§4.4): the first round's fallback retrieval for the question is
    the token-budgeted Top-K_max selection instead of its top-k; otherwise ``iterative``."""

    name = "combined"
    knobs: Knobs  # the checked knobs (the model below), read as self.knobs.<name>

    class Knobs(Iterative.Knobs):
        initial: Literal["none", "budget"] = "budget"
        token_budget: int | None = knobs.knob(None, search=knobs.BudgetRange(), ge=1)
