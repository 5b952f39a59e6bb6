"""Knowledge-aware iterative retrieval (Knowledge-Aware Iterative Retrieval for Multi-Agent
Systems, Algorithm 1): each step plans a query from what is Known and what is Required
(rejecting queries too close to earlier ones), retrieves (BM25 top-10), extracts new facts
(each citing a passage) and the remaining gaps, and filters the passages down to verbatim
segments; it stops when nothing is Required or at ``max_steps``. A separate generator answers
from the refined context.

With ``n_agents`` > 1: *competitive* agents keep their own state, the system stops as soon as
one has no open gap and keeps the agent with the fewest; *collaborative* agents share one
knowledge base and context, and the open gaps are dealt out across them each step."""

from __future__ import annotations

from typing import Literal

import dspy
from dspy.utils.exceptions import AdapterParseError

from netcast import trace
from netcast.corpus import format_passage
from netcast.programs import knobs
from netcast.programs.base import NetcastProgram
from netcast.programs.knowledge import state as knowledge
from netcast.programs.knowledge.concurrency import run_concurrently
from netcast.programs.knowledge.signatures import ExtractKnowledge, FilterContext, PlanQuery
from netcast.programs.registry import register
from netcast.programs.shared.lists import parse_list
from netcast.signatures import ANSWER_TOKENS, AnswerQuestion

# Competitive agents start from the same state; each plans from its own angle so that they do
# not issue the same queries.
PERSPECTIVES = (
    "search for the most specific named entity involved",
    "search for the relation or event that links the entities",
    "search for broader background on the topic",
)


@register
class KnowledgeAware(NetcastProgram):
    name = "knowledge"

    class Knobs(knobs.Knobs):
        max_steps: int = knobs.knob(4, search=knobs.IntRange(1, 6), ge=1)
        k: int = knobs.knob(10, search=knobs.IntRange(3, 15), ge=1)
        n_agents: int = knobs.knob(1, search=knobs.IntRange(1, 3), ge=1, le=3)
        mode: Literal["competitive", "collaborative"] = knobs.knob(
            "competitive", search=knobs.Choice(("competitive", "collaborative"))
        )
        # reject a query this similar (Jaccard) to an earlier one
        diversity_threshold: float = knobs.knob(
            0.8, search=knobs.FloatRange(0.5, 1.0), ge=0.0, le=1.0
        )
        concurrent: bool = True  # run agents in threads (a local model serializes them anyway)
        dedup: bool = False  # the test-time de-duplication module (Known already is a memory)
        # how a filtered segment must match its passage: the paper's verbatim rule ("exact",
        # whitespace and case aside) or a tolerant alignment ("fuzzy", netcast's default for
        # small models); either way the passage's own text is kept
        match: Literal["exact", "fuzzy"] = "fuzzy"
        match_threshold: float = knobs.knob(0.9, ge=0.5, le=1.0)

    def __init__(self, retriever=None, *, lm=None, **knob_values):
        super().__init__(retriever, lm=lm, **knob_values)
        self.plan = dspy.Predict(PlanQuery)
        self.extract = dspy.Predict(ExtractKnowledge)
        self.filter = dspy.Predict(FilterContext)
        self.generate = dspy.Predict(AnswerQuestion, max_tokens=ANSWER_TOKENS)

    # --- one step of one agent -----------------------------------------------------------

    def plan_query(self, question: str, state: knowledge.AgentState, gap: str, perspective: str):
        """A query that passes the diversity check, or None; and the rejected ones."""
        focus = f"{gap} (approach: {perspective})" if perspective else gap
        rejected = []
        history = list(state.history)
        for _ in range(2):
            query = str(
                self.plan(
                    question=question,
                    known=state.known,
                    required=state.required,
                    focus=focus,
                    history=history,
                ).query
                or ""
            ).strip()
            if query and not knowledge.is_redundant(
                query, state.history, self.knobs["diversity_threshold"]
            ):
                trace.check("plan", True)
                return query, rejected
            trace.check("plan", False, "empty query" if not query else "too similar")
            rejected.append(query)
            history.append(f"{query} (rejected: too similar to an earlier query)")
        if gap and not knowledge.is_redundant(
            gap, state.history, self.knobs["diversity_threshold"]
        ):
            trace.count("plan", "fallbacks")
            return gap, rejected  # fall back to searching the gap itself
        return None, rejected

    def explore(
        self, question: str, state: knowledge.AgentState, gap: str, session, perspective: str = ""
    ) -> tuple[dict, list]:
        """Plan a query for ``gap`` and retrieve; returns the step record and the hits."""
        query, rejected = self.plan_query(question, state, gap, perspective)
        record = {"gap": gap, "query": query, "rejected_queries": rejected}
        if query is None:
            return {**record, "stalled": True, "returned": []}, []
        state.history.append(query)
        hits = session.search(query, self.knobs["k"])
        return {**record, "returned": [h.chunk.id for h in hits]}, hits

    def absorb(self, question: str, state: knowledge.AgentState, hits: list) -> dict:
        """Extract facts and remaining gaps from ``hits`` into ``state``; keep verbatim
        segments. Facts must cite a shown passage; segments must occur in their passage."""
        if not hits:
            return {
                "new_facts": [],
                "known": list(state.known),
                "required": list(state.required),
                "kept": [],
            }
        labels = {state.label(h.chunk): h.chunk for h in hits}
        corpus = self.retriever.corpus  # a fact may cite any passage this agent has seen
        seen = {label: corpus[cid] for cid, label in state.labels.items()}
        shown = [f"[{label}] {format_passage(c.title, c.text)}" for label, c in labels.items()]
        try:
            out = self.extract(
                question=question, known=state.known, required=state.required, passages=shown
            )
            facts, unsupported = knowledge.verified_facts(list(out.new_facts or []), seen)
            gaps = parse_list(list(out.still_required or []))
        except AdapterParseError:
            trace.count("extract", "fallbacks")  # keep the state as it was
            facts, unsupported, gaps = [], [], state.required
        for _ in facts:
            trace.check("extract", True)
        for _ in unsupported:
            trace.check("extract", False, "no valid citation")
        state.known += [f for f in facts if f not in state.known]
        state.required = gaps
        try:
            segments = list(
                self.filter(question=question, known=state.known, passages=shown).segments or []
            )
        except AdapterParseError:
            trace.count("filter", "fallbacks")
            segments = []
        kept, not_verbatim = knowledge.verified_segments(
            segments, labels, self.knobs["match"], self.knobs["match_threshold"]
        )
        for _ in kept:
            trace.check("filter", True)
        for _ in not_verbatim:
            trace.check("filter", False, "not verbatim in the cited passage")
        for chunk, segment in kept:
            state.keep(chunk, segment)
        return {
            "new_facts": facts,
            "unsupported_facts": unsupported,
            "known": list(state.known),
            "required": list(state.required),
            "kept": [[c.id, seg] for c, seg in kept],
            "rejected_segments": not_verbatim,
        }

    def perspective(self, agent: int) -> str:
        return PERSPECTIVES[agent] if self.knobs["n_agents"] > 1 else ""

    def competitive_round(self, question, states, sessions, workers) -> list[tuple[int, dict]]:
        """Each agent with open gaps explores and absorbs into its own state."""

        def agent_step(i: int) -> dict:
            record, hits = self.explore(
                question, states[i], states[i].required[0], sessions[i], self.perspective(i)
            )
            return {**record, **self.absorb(question, states[i], hits)}

        live = [i for i, s in enumerate(states) if s.required]
        results = run_concurrently([lambda i=i: agent_step(i) for i in live], workers)
        return list(zip(live, results, strict=True))

    def collaborative_round(self, question, state, session, workers) -> list[tuple[int, dict]]:
        """Open gaps are dealt out across the agents; they search concurrently; what they find
        is absorbed once into the one shared state."""
        n = self.knobs["n_agents"]
        gaps = state.required or [question]
        assigned = [gaps[i % len(gaps)] for i in range(min(n, len(gaps)))]
        explored = run_concurrently(
            [lambda g=g: self.explore(question, state, g, session) for g in assigned], workers
        )
        hits, seen = [], set()
        for _, agent_hits in explored:
            for h in agent_hits:
                if h.chunk.id not in seen:
                    seen.add(h.chunk.id)
                    hits.append(h)
        shared = self.absorb(question, state, hits)
        return [(i, {**record, **shared}) for i, (record, _) in enumerate(explored)]

    # --- the cycle -------------------------------------------------------------------------

    def forward(self, question: str) -> dspy.Prediction:
        n = self.knobs["n_agents"]
        record = trace.current()
        workers = n if self.knobs["concurrent"] else 1
        collaborative = self.knobs["mode"] == "collaborative"
        states = [
            knowledge.AgentState(required=[question]) for _ in range(1 if collaborative else n)
        ]
        sessions = [self.search_session(question) for _ in states]
        step = 0
        for step in range(1, self.knobs["max_steps"] + 1):
            if collaborative:
                results = self.collaborative_round(question, states[0], sessions[0], workers)
            else:
                results = self.competitive_round(question, states, sessions, workers)
            if record is not None:
                for agent, result in results:
                    record.add_turn(step=step, agent=agent, **result)
            stalled = all(r.get("stalled") for _, r in results)
            if any(not s.required for s in states) or stalled:
                break  # an agent resolved every requirement (or none can search further)
        best = min(
            range(len(states)), key=lambda i: (len(states[i].required), -len(states[i].known), i)
        )
        chosen = states[best]
        context = chosen.context(self.retriever.corpus)
        answer = self.generate(context=context, question=question).answer
        if record is not None:
            record.add_stage(
                "result", agent=best, known=chosen.known, required=chosen.required, steps=step
            )
        return dspy.Prediction(
            answer=answer,
            evidence=list(chosen.segments),
            context=context,
            known=chosen.known,
            required=chosen.required,
            agent=best,
            steps=step,
        )
