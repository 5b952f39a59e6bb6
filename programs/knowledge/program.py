"""Knowledge-aware iterative retrieval (Knowledge-Aware Iterative Retrieval for Multi-Agent
Systems, Algorithm 1). Each step an agent plans a query from what is Known and what is Required
(progressive diversity promotion, Eq. 2: ``candidates`` queries are planned, the first greedy
and the others sampled, and the one scoring best on its difference from earlier queries and its
relevance to the open gaps, weighted by ``diversity_weight``, is searched),
retrieves (BM25 top-10), updates its knowledge (Eq. 4: every known fact is checked against the
new passages and kept, corrected or dropped, and must be supported by a passage it has seen:
cited, or with ``cite="inferred"`` matched by its words; the gaps are listed anew), and
filters the context (Eq. 3 and 5: the refined context so far and the new passages are filtered
again with the latest Known and Required, so it stays bounded; segments must be copies of their
passage and keep the passage's own text). It stops when nothing is Required or at
``max_steps``. A separate generator (``generator_model``) answers from the refined context.

With ``n_agents`` > 1 (Section 3.3): *competitive* agents keep their own Known and Required and
each proposes a step (agents after the first plan by sampling, at ``sample_temperature`` with
their own seeds, so they do not repeat the first agent); the agent with the fewest open gaps
wins the step (Eq. 6) and its filtered context becomes the shared refined context every agent
sees next; the system stops as soon as an agent has no open gap. *Collaborative* agents share
one knowledge base and context and act in sequence within a step, each on the next open gap, so
agent 2 plans from what agent 1 just found. Role perspectives are off by default (in the paper
they emerge); ``perspectives`` gives each competitive agent a fixed angle.

Deliberate choices, as knobs: ``revise_known=False`` keeps Known append-only, ``refilter=False``
only adds to the refined context (netcast's earlier behaviour); ``match="exact"`` is the paper's
verbatim rule for segments (default ``fuzzy``, for small models); ``cite="explicit"`` accepts
only Known facts that cite a seen passage (default ``inferred``: an uncited fact whose content
words one seen passage holds is cited for it; the 0.5B model cited nothing)."""

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
from netcast.programs.knowledge.signatures import (
    EXTRACT_TOKENS,
    FILTER_TOKENS,
    ExtractKnowledge,
    FilterContext,
    PlanQuery,
)
from netcast.programs.registry import register
from netcast.programs.shared import annotations
from netcast.programs.shared.lists import parse_list
from netcast.signatures import ANSWER_TOKENS, AnswerQuestion

# With ``perspectives``, competitive agents plan from these fixed angles.
PERSPECTIVES = (
    "search for the most specific named entity involved",
    "search for the relation or event that links the entities",
    "search for broader background on the topic",
)


@register
class KnowledgeAware(NetcastProgram):
    name = "knowledge"
    knobs: Knobs  # the checked knobs (the model below), read as self.knobs.<name>

    class Knobs(knobs.Knobs):
        # the paper observed 4.9 steps on average, up to 6
        max_steps: int = knobs.knob(6, search=knobs.IntRange(1, 8), ge=1)
        k: int = knobs.knob(10, search=knobs.IntRange(3, 15), ge=1)
        n_agents: int = knobs.knob(1, search=knobs.IntRange(1, 3), ge=1, le=3)
        mode: Literal["competitive", "collaborative"] = knobs.knob(
            "competitive", search=knobs.Choice(("competitive", "collaborative"))
        )
        # a planned query at least this similar (Jaccard) to an earlier one is planned again
        diversity_threshold: float = knobs.knob(
            0.8, search=knobs.FloatRange(0.5, 1.0), ge=0.0, le=1.0
        )
        # Eq. 2: weight of difference from earlier queries against relevance to the gaps
        diversity_weight: float = knobs.knob(0.5, search=knobs.FloatRange(0.0, 1.0), ge=0.0, le=1.0)
        # Eq. 2 chooses among candidate queries: how many are planned per step
        candidates: int = knobs.knob(2, search=knobs.IntRange(1, 4), ge=1)
        # temperature of sampled candidates and of competitive agents after the first
        sample_temperature: float = knobs.knob(0.7, ge=0.0, le=2.0)
        revise_known: bool = True  # Eq. 4: known facts are checked and may be dropped
        refilter: bool = True  # Eq. 3/5: the refined context is filtered again each step
        perspectives: bool = False  # fixed angles for competitive agents
        generator_model: str | None = None  # the separate generator; None: the main model
        concurrent: bool = True  # competitive agents in threads (a local model serializes)
        dedup: bool = False  # the test-time de-duplication module (Known already is a memory)
        # how a filtered segment must match its passage: the paper's verbatim rule ("exact",
        # whitespace and case aside) or a tolerant alignment ("fuzzy", netcast's default for
        # small models); either way the passage's own text is kept
        match: Literal["exact", "fuzzy"] = "fuzzy"
        match_threshold: float = knobs.knob(0.9, ge=0.5, le=1.0)
        # a Known fact must be supported by a passage the agent has seen: "explicit" accepts
        # only facts that cite one; "inferred" (netcast's default, for small models that do
        # not cite) also accepts an uncited fact when one seen passage holds at least
        # fact_support of its content words, and cites that passage for it
        cite: Literal["explicit", "inferred"] = "inferred"
        fact_support: float = knobs.knob(0.8, ge=0.5, le=1.0)
        # the precision step and the link hop of each search (programs.knobs); no search
        # range for links yet: unmeasured here
        rerank_pool: knobs.RerankPool = 0
        rerank_signal: knobs.Signal = "retriever"
        links: knobs.Links = 0

    def __init__(self, retriever=None, *, lm=None, **knob_values):
        super().__init__(retriever, lm=lm, **knob_values)
        self.plan = dspy.Predict(PlanQuery)
        self.extract = dspy.Predict(ExtractKnowledge, max_tokens=EXTRACT_TOKENS)
        self.filter = dspy.Predict(FilterContext, max_tokens=FILTER_TOKENS)
        self.generate = dspy.Predict(AnswerQuestion, max_tokens=ANSWER_TOKENS)

    # --- one step of one agent -----------------------------------------------------------

    def sampling(self, agent: int, attempt: int) -> dict:
        """The plan call's config: the first agent's first candidate is the model's own (greedy)
        choice; every other candidate, and every other competitive agent, is an independent
        sample (``sample_temperature``, its own seed and DSPy rollout), so candidates and agents
        can differ and roles can emerge."""
        sample = agent * (self.knobs.candidates + 1) + attempt
        if sample == 0:
            return {}
        return {
            "temperature": self.knobs.sample_temperature,
            "rollout_id": sample,
            "seed": sample,
        }

    def plan_query(
        self, question: str, state: knowledge.AgentState, gap: str, perspective: str, agent: int = 0
    ):
        """The best of ``candidates`` planned queries by Eq. 2 (None if every candidate repeats
        an earlier query), and the candidates with their scores. A candidate at least
        ``diversity_threshold`` similar to an earlier query is shown to the next attempt as too
        similar; if no candidate is fresh, one more is planned."""
        focus = f"{gap} (approach: {perspective})" if perspective else gap
        history = list(state.history)
        candidates: list[str] = []
        n = self.knobs.candidates
        for attempt in range(n + 1):
            fresh_found = any(
                not knowledge.is_redundant(q, state.history, self.knobs.diversity_threshold)
                for q in candidates
            )
            if attempt == n and fresh_found:
                break
            query = str(
                self.plan(
                    question=question,
                    known=state.known,
                    required=state.required,
                    focus=focus,
                    history=history,
                    config=self.sampling(agent, attempt),
                ).query
                or ""
            ).strip()
            if query and query not in candidates:
                candidates.append(query)
            if not query or knowledge.is_redundant(
                query, state.history, self.knobs.diversity_threshold
            ):
                history.append(f"{query} (too similar to an earlier query)")
        weight = self.knobs.diversity_weight
        scored = [
            (knowledge.diversity_score(q, state.history, state.required, weight), q)
            for q in candidates
        ]
        fresh = [(s, q) for s, q in scored if not knowledge.is_redundant(q, state.history, 1.0)]
        if not fresh and gap and not knowledge.is_redundant(gap, state.history, 1.0):
            # every planned query repeats an earlier one: search the gap itself
            trace.count("plan", "fallbacks")
            score = knowledge.diversity_score(gap, state.history, state.required, weight)
            scored.append((score, gap))
            fresh = [(score, gap)]
        if not fresh:
            trace.check("plan", False, "every candidate repeats an earlier query")
            return None, scored
        trace.check("plan", True)
        return max(fresh, key=lambda sq: sq[0])[1], scored

    def update_knowledge(self, question: str, state: knowledge.AgentState, hits: list) -> dict:
        """Eq. 4: revise Known against the new passages (facts must cite a passage the agent
        has seen) and list the open gaps anew."""
        labels = {state.label(h.chunk): h.chunk for h in hits}
        corpus = self.retriever.corpus
        seen = {label: corpus[cid] for cid, label in state.labels.items()}
        shown = [f"[{label}] {format_passage(c.title, c.text)}" for label, c in labels.items()]
        try:
            out = self.extract(
                question=question, known=state.known, required=state.required, passages=shown
            )
            facts, unsupported = knowledge.verified_facts(
                list(out.known_facts or []), seen, self.knobs.cite, self.knobs.fact_support
            )
            gaps = parse_list(list(out.still_required or []))
        except AdapterParseError:
            trace.count("extract", "fallbacks")  # keep the state as it was
            return {"new_facts": [], "dropped_facts": [], "unsupported_facts": []}
        for _ in facts:
            trace.check("extract", True)
        for _ in unsupported:
            trace.check("extract", False, "no valid citation")
        before = list(state.known)
        if self.knobs.revise_known:
            state.known = list(dict.fromkeys(facts))
        else:
            state.known += [f for f in facts if f not in state.known]
        state.required = gaps
        return {
            "new_facts": [f for f in state.known if f not in before],
            "dropped_facts": [f for f in before if f not in state.known],
            "unsupported_facts": unsupported,
        }

    def filter_context(self, question: str, state: knowledge.AgentState, hits: list) -> dict:
        """Eq. 3 and 5: the refined context so far and the new passages, filtered with the
        latest Known and Required; kept segments are spans of their passage."""
        corpus = self.retriever.corpus
        shown_chunks = {state.label(h.chunk): h.chunk for h in hits}
        shown = [f"[{lab}] {format_passage(c.title, c.text)}" for lab, c in shown_chunks.items()]
        if self.knobs.refilter:
            for cid, segments in state.segments.items():
                label = state.label(corpus[cid])
                shown.append(f"[{label}] {format_passage(corpus[cid].title, ' … '.join(segments))}")
                shown_chunks[label] = corpus[cid]
        try:
            segments = list(
                self.filter(
                    question=question, known=state.known, required=state.required, passages=shown
                ).segments
                or []
            )
        except AdapterParseError:
            trace.count("filter", "fallbacks")  # the context stays as it was
            return {"kept": [], "rejected_segments": []}
        kept, not_verbatim = knowledge.verified_segments(
            segments, shown_chunks, self.knobs.match, self.knobs.match_threshold
        )
        for _ in kept:
            trace.check("filter", True)
        for _ in not_verbatim:
            trace.check("filter", False, "not a copy of the cited passage")
        if self.knobs.refilter and kept:
            state.segments = {}
        elif self.knobs.refilter:
            trace.count("filter", "fallbacks")  # nothing usable: keep the context as it was
        for chunk, segment in kept:
            state.keep(chunk, segment)
        return {"kept": [[c.id, s] for c, s in kept], "rejected_segments": not_verbatim}

    def agent_step(
        self,
        question: str,
        state: knowledge.AgentState,
        gap: str,
        session,
        perspective: str = "",
        agent: int = 0,
    ) -> dict:
        """Plan, retrieve, update the knowledge, filter the context; the step's record."""
        query, scored = self.plan_query(question, state, gap, perspective, agent)
        record = {"gap": gap, "query": query, "candidates": [[q, round(s, 3)] for s, q in scored]}
        if query is None:
            return {**record, "stalled": True, "returned": []}
        state.history.append(query)
        hits = session.search(query, self.knobs.k)
        record["returned"] = [h.chunk.id for h in hits]
        if hits:
            record.update(self.update_knowledge(question, state, hits))
            record.update(self.filter_context(question, state, hits))
        return {**record, "known": list(state.known), "required": list(state.required)}

    def perspective(self, agent: int) -> str:
        multi = self.knobs.n_agents > 1 and self.knobs.perspectives
        return PERSPECTIVES[agent] if multi else ""

    # --- rounds ----------------------------------------------------------------------------

    def competitive_round(self, question, states, sessions, workers, step, record) -> list:
        """Every agent with open gaps proposes a step on its own knowledge; the fewest open
        gaps wins (Eq. 6) and its context becomes the shared refined context."""
        live = [i for i, s in enumerate(states) if s.required]
        results = run_concurrently(
            [
                lambda i=i: self.agent_step(
                    question,
                    states[i],
                    states[i].required[0],
                    sessions[i],
                    self.perspective(i),
                    agent=i,
                )
                for i in live
            ],
            workers,
        )
        winner = min(live, key=lambda i: (len(states[i].required), -len(states[i].known), i))
        shared = {cid: list(segs) for cid, segs in states[winner].segments.items()}
        for s in states:
            s.segments = {cid: list(segs) for cid, segs in shared.items()}
        if record is not None and len(states) > 1:
            record.add_stage("winner", step=step, agent=winner)
        return list(zip(live, results, strict=True))

    def collaborative_round(self, question, state, session) -> list:
        """The agents share one state and act in turn, each on the next open gap, so each
        plans from what the one before it found."""
        results, attempted = [], set()
        for agent in range(self.knobs.n_agents):
            gaps = [g for g in state.required if g not in attempted]
            if not gaps:
                break
            attempted.add(gaps[0])
            step = self.agent_step(question, state, gaps[0], session, agent=agent)
            results.append((agent, step))
        return results

    # --- the cycle -------------------------------------------------------------------------

    def forward(self, question: str) -> dspy.Prediction:
        n = self.knobs.n_agents
        record = trace.current()
        collaborative = self.knobs.mode == "collaborative"
        states = [
            knowledge.AgentState(required=[question]) for _ in range(1 if collaborative else n)
        ]
        sessions = [self.search_session(question) for _ in states]
        step = 0
        for step in range(1, self.knobs.max_steps + 1):
            if collaborative:
                results = self.collaborative_round(question, states[0], sessions[0])
            else:
                workers = n if self.knobs.concurrent else 1
                results = self.competitive_round(question, states, sessions, workers, step, record)
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
        generator = self.generator_lm()
        extra = {"lm": generator} if generator is not None else {}
        out = self.generate(context=context, question=question, **extra)
        if record is not None:
            record.add_stage(
                "result", agent=best, known=chosen.known, required=chosen.required, steps=step
            )
        return dspy.Prediction(
            answer=out.answer,
            evidence=list(chosen.segments),
            context=context,
            known=chosen.known,
            required=chosen.required,
            agent=best,
            steps=step,
        )

    def annotated_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """From the record's annotations: ``plan``'s first step searches the first gold passage
        (its title, or the MuSiQue sub-question it answers: ``annotations.gold_queries``); the
        other steps read that search's passages through ``replay_session`` (top-``k``, the
        link hop as set), as the first step does at run time (labelled P1, P2, ...; gold
        passages swapped in for the last others where retrieval missed them): ``extract``
        knows each gold passage's supporting sentences, cited "(P#)", with nothing still
        required;
        ``filter`` copies the gold passages' supporting sentences (a whole gold passage where
        the record names none) and nothing of the others; ``generate`` answers from that
        refined context. Not taught: later plans (their Required gaps are the model's own
        wording), and ``extract`` for a record without supporting sentences for every gold
        passage (MuSiQue's are derived from its hops' answers: ``netcast.data.records.hop_facts``;
        a passage whose sentences do not hold its hop's answer has none)."""
        gold = annotations.require(example, "gold_passages", self.name)
        question = example.question
        query = annotations.gold_queries(example)[0][1]  # the planned search the steps read
        hits = self.replay_session(question).search(query, self.knobs.k)
        found = [(h.chunk.id, p) for h, p in zip(hits, self.passages(hits), strict=True)]
        shown = annotations.marked_context_with_gold(found, gold, len(found))
        facts: dict[str, str] = {}  # gold passage id -> its cited fact
        segments: list[str] = []
        context: list[str] = []
        done: set[str] = set()  # a gold document retrieved as several chunks counts once
        for n, (_, source) in enumerate(shown, 1):
            if source is None or source["id"] in done:
                continue
            done.add(source["id"])
            support = annotations.supporting_sentences(source)
            parts = annotations.sentences(source["text"])
            kept = [parts[i] for i in sorted(set(source["facts"]))] if support else [source["text"]]
            if support:
                facts[source["id"]] = f"{support.rstrip('.')} (P{n})"
            segments += [f"[P{n}] {segment}" for segment in kept]
            context.append(format_passage(source["title"], " … ".join(kept)))
        known = list(facts.values())
        complete = len(facts) == len(gold)
        passages = [f"[P{n}] {text}" for n, (text, _) in enumerate(shown, 1)]
        inputs = {"question": question, "known": [], "required": [question]}
        demos = {
            "plan": [
                dspy.Example(
                    **inputs,
                    focus=question,
                    history=[],
                    query=query,
                ).with_inputs("question", "known", "required", "focus", "history")
            ],
            "filter": [
                dspy.Example(
                    question=question,
                    known=known,
                    required=[] if complete else [question],
                    passages=passages,
                    segments=segments,
                ).with_inputs("question", "known", "required", "passages")
            ],
            "generate": [
                dspy.Example(context=context, question=question, answer=example.answer).with_inputs(
                    "context", "question"
                )
            ],
        }
        if complete:
            demos["extract"] = [
                dspy.Example(
                    **inputs, passages=passages, known_facts=known, still_required=[]
                ).with_inputs("question", "known", "required", "passages")
            ]
        return demos

    def generator_lm(self):
        """The separate generator named by ``generator_model`` (made once), or None."""
        name = self.knobs.generator_model
        if not name:
            return None
        if getattr(self, "_generator", None) is None or self._generator.model != name:
            from netcast.models import make_lm

            self._generator = make_lm(name)
        return self._generator
