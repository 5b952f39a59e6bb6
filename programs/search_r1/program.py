"""A Search-R1-style agent (the baseline of Test-Time Strategies for More Efficient and
Accurate Agentic RAG): the model reasons, then emits a search query or its final answer;
retrieved passages (k = 3) come back into its reasoning; at most ``max_steps`` searches.
Switch on ``dedup`` (unseen passages only), ``contextualize`` (a growing memory of useful notes,
written by the ``aux_model``; each step then sees the newest passages plus the memory instead
of every passage so far), or both (hybrid)."""

from __future__ import annotations

import dspy
from dspy.utils.exceptions import AdapterParseError

from netcast import trace
from netcast.corpus import doc_id_of_chunk
from netcast.programs import knobs
from netcast.programs.base import NetcastProgram
from netcast.programs.registry import register
from netcast.programs.search_r1.signatures import ReasonAndAct
from netcast.programs.shared import annotations
from netcast.programs.shared.search import EMPTY_MEMORY, SearchSession
from netcast.signatures import ANSWER_TOKENS, AnswerQuestion, Contextualize


@register
class SearchR1(NetcastProgram):
    name = "search_r1"
    knobs: Knobs  # the checked knobs (the model below), read as self.knobs.<name>

    class Knobs(knobs.Knobs):
        # searches at most (``max_turns`` is an alias)
        max_steps: int = knobs.knob(4, search=knobs.IntRange(1, 6), ge=1, aliases=("max_turns",))
        k: int = knobs.knob(3, search=knobs.IntRange(1, 8), ge=1)
        dedup: bool = knobs.knob(False, search=knobs.Choice((False, True)))
        contextualize: bool = knobs.knob(False, search=knobs.Choice((False, True)))
        # litellm model string for contextualization; None: the main model
        aux_model: str | None = None
        search_first: bool = True  # nothing retrieved yet: an answer becomes a search
        # the precision step and the link hop of each search (programs.knobs); no search
        # range for links yet: unmeasured here
        rerank_pool: knobs.RerankPool = 0
        rerank_signal: knobs.Signal = "retriever"
        links: knobs.Links = 0

    def __init__(self, retriever=None, *, lm=None, **knob_values):
        super().__init__(retriever, lm=lm, **knob_values)
        self.step = dspy.ChainOfThought(ReasonAndAct)
        self.contextualize = dspy.Predict(Contextualize)
        self.answer = dspy.Predict(AnswerQuestion, max_tokens=ANSWER_TOKENS)

    def annotated_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """From the record's annotations, a trajectory replayed through the program's own
        search (``replay_session``: de-duplication, a precision step that calls no model and
        the link hop as the knobs set them): the question is searched first, and ``step`` then
        searches for a gold passage that search missed (by its title, or the MuSiQue
        sub-question it answers: ``annotations.gold_queries``; not with ``max_steps`` 1, where
        the run cannot search again); if it missed none, the first step, before any search,
        searches the first gold passage instead of the question. ``step`` then answers the
        gold answer over the trace those searches built (the trace a step sees: with
        ``contextualize``, the newest information block and the empty-memory line), gold
        passages it does not hold swapped into its newest block for the last others;
        ``answer`` gives it from what the run's reader reads: every passage retrieved (with
        ``contextualize``, that newest block), gold swapped in likewise. Not taught: the
        reasoning before a step (the model's own thoughts: the demos have none and no 'think:'
        entries), and memory notes (the auxiliary model's own words, which no annotation
        holds)."""
        gold = annotations.require(example, "gold_passages", self.name)
        question, k = example.question, self.knobs.k
        memory_on = bool(self.knobs.contextualize)
        memory = [EMPTY_MEMORY] if memory_on else []

        def retrieve(searching: SearchSession, query: str) -> list[tuple[str, str]]:
            hits = searching.search(query, k)
            return [(h.chunk.id, p) for h, p in zip(hits, self.passages(hits), strict=True)]

        def info(texts: list[str]) -> str:
            return "information: " + (" | ".join(texts) or "(nothing new)")

        def step(steps: list[str], action: str, query: str = "", answer: str = ""):
            return dspy.Example(
                question=question,
                memory=memory,
                trace=self.shown_trace(steps, memory_on),
                action=action,
                query=query,
                answer=answer,
            ).with_inputs("question", "memory", "trace")

        targets = annotations.gold_queries(example)
        live = self.replay_session(question)
        first = retrieve(live, question)
        have = {doc_id_of_chunk(cid) for cid, _ in first if annotations.is_gold(cid, gold)}
        missing = [query for passage, query in targets if passage["id"] not in have]
        if missing and self.knobs.max_steps > 1:
            searches = [(question, first), (missing[0], retrieve(live, missing[0]))]
            demos = [
                step([f"search: {question}", info([t for _, t in first])], "search", missing[0])
            ]
        elif missing:  # one search allowed: the question's, then the answer
            searches, demos = [(question, first)], []
        else:  # the question's search holds them all: the first step searches a gold passage
            query = targets[0][1]
            searches = [(query, retrieve(self.replay_session(question), query))]
            demos = [step([], "search", query)]
        steps = [
            entry
            for query, found in searches[:-1]
            for entry in (f"search: {query}", info([t for _, t in found]))
        ]
        # the newest block gets every gold passage the trace the step sees does not hold
        held = {doc_id_of_chunk(cid) for _, found in searches[:-1] for cid, _ in found}
        lacking = gold if memory_on else [g for g in gold if g["id"] not in held]
        query, newest = searches[-1]
        latest = annotations.context_with_gold(newest, lacking, len(newest))
        steps += [f"search: {query}", info(latest)]
        demos.append(step(steps, "answer", answer=example.answer))
        if memory_on:  # the reader reads the memory (empty here) and the newest passages
            context = latest
        else:
            everything = [pair for _, found in searches for pair in found]
            context = annotations.context_with_gold(everything, gold, len(everything))
        final = dspy.Example(context=context, question=question, answer=example.answer)
        return {"step": demos, "answer": [final.with_inputs("context", "question")]}

    def forward(self, question: str) -> dspy.Prediction:
        knobs = self.knobs
        memory_on = bool(knobs.contextualize)
        session = self.search_session(question, self.contextualize)
        record = trace.current()
        everything: list[str] = []  # every passage retrieved, for the evidence and the answer
        latest: list[str] = []
        steps: list[str] = []  # the reasoning trace: think / search / information entries
        for turn in range(1, knobs.max_steps + 2):
            try:
                out = self.step(
                    question=question,
                    memory=session.memory_view() if memory_on else [],
                    trace=self.shown_trace(steps, memory_on),
                )
                action = str(out.action)
                reasoning = str(getattr(out, "reasoning", "") or "").strip()
            except AdapterParseError:
                trace.count("step", "fallbacks")  # answers with what it has
                out, action, reasoning = None, "unparsed", ""
            if reasoning:
                steps.append(f"think: {reasoning}")
            forced = action != "search" and not everything and knobs.search_first
            if forced:  # nothing retrieved yet: the agent searches before it answers
                trace.count("step", "fallbacks")
            elif action == "answer" and str(out.answer or "").strip():
                if record is not None:
                    record.add_turn(turn=turn, action="answer", query=None, returned=[])
                return self._prediction(str(out.answer), session, everything)
            elif action != "search" or turn > knobs.max_steps:
                break  # unreadable, or the search budget is spent: answer below
            query = question if forced else (str(out.query or "").strip() or question)
            hits = session.search(query, knobs.k)
            latest = self.passages(hits)
            everything += latest
            steps.append(f"search: {query}")
            steps.append("information: " + (" | ".join(latest) or "(nothing new)"))
            if record is not None:
                update = session.memory_updates[-1] if memory_on and hits else None
                record.add_turn(
                    turn=turn,
                    action="search",
                    forced=forced,
                    query=query,
                    returned=[h.chunk.id for h in hits],
                    memory_added=update["added"] if update else [],
                    memory_size=len(session.memory),
                )
        context = (session.memory + latest) if memory_on else everything
        answer = self.answer(context=context, question=question).answer
        if record is not None:
            record.add_turn(turn="limit", action="answer", query=None, returned=[])
        return self._prediction(answer, session, everything)

    @staticmethod
    def shown_trace(steps: list[str], memory_on: bool) -> list[str]:
        """The trace a step sees. Search-R1 appends every information block to one growing
        trace; with contextualization, information blocks before the newest are left out (the
        memory carries what they held)."""
        if not memory_on:
            return list(steps)
        last = max((i for i, s in enumerate(steps) if s.startswith("information: ")), default=-1)
        return [s for i, s in enumerate(steps) if i == last or not s.startswith("information: ")]

    @staticmethod
    def _prediction(answer: str, session, everything: list[str]) -> dspy.Prediction:
        return dspy.Prediction(
            answer=answer,
            evidence=list(session.seen),
            context=everything,
            memory=list(session.memory),
        )
