"""One-SHOT ("cast a bigger net", Fishing for Answers §3.1): retrieve a candidate pool sized by
the token budget, optionally drop chunks the rule-based metadata filter rejects and add chunks
covering query entities the selection lacks, optionally crop chunks to their relevant sentences
(an LLM step, checked to be verbatim), and fill the token budget by knapsack selection over
relevance (Eq. 1, raw retriever scores; see ``netcast.programs.shared.budget``); then answer
once. Filter and crop run before the budget is filled, so freed tokens are refilled from the
pool. ``relevance_signal`` replaces the retriever's scores with another signal's
(``programs.shared.rerank``: dense cosine, question likelihood, the model's verdict, or a
fusion), normalized the same way; the default is the paper's.

The pool holds ``pool_factor`` (2) budgets' worth of tokens (at most 1,000 chunks), so the
budget binds: a fixed top-50 pool (~6k tokens) never fills the paper's 32k and Top-K_max would
degenerate to top-50. ``pool_size`` overrides it with a plain top-``pool_size`` pool. With the
filter on, the add step may also draw on the ``wide_pool`` ranks just past the pool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import dspy

from netcast import trace
from netcast.corpus import Chunk, format_passage
from netcast.programs import knobs
from netcast.programs.base import NetcastProgram
from netcast.programs.one_shot import metadata_filter as chunk_filter
from netcast.programs.one_shot.cropping import DROP, verified_crop
from netcast.programs.one_shot.signatures import CropChunk
from netcast.programs.registry import register
from netcast.programs.shared import annotations
from netcast.programs.shared.budget import (
    POOL_FACTOR,
    budget_pool,
    default_token_budget,
    mean_chunk_tokens,
    pool_depth,
    relevance,
    select,
)
from netcast.programs.shared.rerank import relevance_scores
from netcast.signatures import ANSWER_TOKENS, AnswerQuestion

# the annotation teacher, crop on: other passages the answer step's training context keeps whole
# beside the cropped gold ones (the crop's misses the reader learns to read past)
CROP_MISSES = 3

Rule = Literal["declared_year", "declared_region", "text_year", "text_date", "entity_alignment"]


@dataclass
class Candidate:
    chunk: Chunk
    relevance: float
    text: str
    tokens: int
    forced: bool = False  # added by the filter for a missing query entity
    crop_tried: bool = False


def fill(
    candidates: list[Candidate], budget: int, selector: str, resolution: int
) -> list[Candidate]:
    """Forced candidates first (most relevant first, while they fit), then the best knapsack
    selection of the rest in the remaining budget; returned most relevant first."""
    chosen, used = [], 0
    for c in sorted((c for c in candidates if c.forced), key=lambda c: -c.relevance):
        if used + c.tokens <= budget:
            chosen.append(c)
            used += c.tokens
    rest = [c for c in candidates if not c.forced]
    picked = select(
        [c.relevance for c in rest], [c.tokens for c in rest], budget - used, selector, resolution
    )
    chosen += [rest[i] for i in picked]
    return sorted(chosen, key=lambda c: -c.relevance)


@register
class OneShot(NetcastProgram):
    name = "one_shot"
    knobs: Knobs  # the checked knobs (the model below), read as self.knobs.<name>

    class Knobs(knobs.Knobs):
        # None: the paper's 32k scaled to the model (a quarter of its context window)
        token_budget: int | None = knobs.knob(None, search=knobs.BudgetRange(), ge=1)
        # the pool holds pool_factor budgets' worth of tokens (module docstring); an explicit
        # pool_size is a plain top-pool_size pool instead
        pool_factor: float = knobs.knob(POOL_FACTOR, search=knobs.FloatRange(1.0, 4.0), ge=1.0)
        pool_size: int | None = knobs.knob(None, ge=1)
        selector: Literal["exact", "greedy"] = knobs.knob(
            "exact", search=knobs.Choice(("exact", "greedy"))
        )
        filter: bool = knobs.knob(False, search=knobs.Choice((False, True)))
        crop: bool = knobs.knob(False, search=knobs.Choice((False, True)))
        filter_rules: list[Rule] = knobs.knob(list(chunk_filter.DEFAULT_RULES))
        # ranks just past the pool where the filter's add step also looks (after the pool's
        # own unselected chunks)
        wide_pool: int = knobs.knob(50, ge=0)
        max_added: int = knobs.knob(3, ge=0)
        resolution: int = knobs.knob(1, ge=1)  # knapsack budget resolution in tokens
        # a crop's sentences must be the chunk's own: the paper's verbatim rule ("exact",
        # whitespace and case aside) or "fuzzy" (>= crop_threshold similar, for small models)
        crop_match: Literal["exact", "fuzzy"] = "fuzzy"
        crop_threshold: float = knobs.knob(0.9, ge=0.5, le=1.0)
        crop_drops: bool = True  # "no sentence helps" removes the chunk (paper, Table 2)
        # the knapsack's relevance values (Eq. 1's r_i): the retriever's scores (the paper's),
        # or a programs.shared.rerank signal over the pool (programs.knobs.Signal)
        relevance_signal: knobs.Signal = "retriever"

    def __init__(self, retriever=None, *, lm=None, **knob_values):
        super().__init__(retriever, lm=lm, **knob_values)
        self.crop_chunk = dspy.Predict(CropChunk)
        self.answer = dspy.Predict(AnswerQuestion, max_tokens=ANSWER_TOKENS)

    def budget(self) -> int:
        return int(self.knobs.token_budget or default_token_budget(self.context_window))

    def selection(self, candidates: list[Candidate], budget: int) -> list[Candidate]:
        """``fill`` with this program's ``selector`` and ``resolution``."""
        return fill(candidates, budget, self.knobs.selector, self.knobs.resolution)

    def candidates(self, question: str, budget: int) -> tuple[list[Candidate], list[Candidate]]:
        """One search: the candidate pool (``budget_pool`` of a ``pool_depth`` search, or the
        top ``pool_size``) and, with the filter on, the ``wide_pool`` ranks just past it."""
        knobs = self.knobs
        wide = knobs.wide_pool if knobs.filter else 0
        depth = knobs.pool_size or pool_depth(
            budget, mean_chunk_tokens(self.retriever.corpus), knobs.pool_factor
        )
        hits = self.search(question, depth + wide)
        if knobs.pool_size:
            pool = hits[:depth]
        else:
            pool = budget_pool(hits[:depth], budget, knobs.pool_factor)
        ranked = hits[: len(pool) + wide]
        if knobs.relevance_signal == "retriever":
            scores = [h.score for h in ranked]
        else:  # the wider ranks (the filter's add step) keep the pool's worst value
            lm = self.own_lm()
            scores = relevance_scores(question, pool, knobs.relevance_signal, lm=lm)
            scores += [min(scores, default=0.0)] * (len(ranked) - len(pool))
        rel = relevance(scores, self.retriever.kind)
        everything = [
            Candidate(h.chunk, float(r), h.chunk.text, h.chunk.n_tokens)
            for h, r in zip(ranked, rel, strict=True)
        ]
        return everything[: len(pool)], everything[len(pool) :]

    def forward(self, question: str) -> dspy.Prediction:
        knobs = self.knobs
        budget = self.budget()
        pool, wider = self.candidates(question, budget)
        record = trace.current()
        pool_tokens = sum(c.tokens for c in pool)

        if knobs.filter:
            pool = self.filter_pool(question, pool, wider, budget, record)
        if knobs.crop:
            self.crop_selected(question, pool, budget, record)
        chosen = self.selection(pool, budget)
        if record is not None:
            record.add_stage(
                "select",
                candidates=len(pool),
                pool_tokens=pool_tokens,
                selected=len(chosen),
                tokens=sum(c.tokens for c in chosen),
                budget=budget,
            )
        context = [format_passage(c.chunk.title, c.text) for c in chosen]
        answer = self.answer(context=context, question=question).answer
        return dspy.Prediction(
            answer=answer, evidence=[c.chunk.id for c in chosen], context=context
        )

    def annotated_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """From the record's annotations. ``answer`` reads the gold answer from the context the
        budget fills for the question, gold passages swapped in where retrieval missed them.
        With the crop on, that context is the one the crop leaves when it does as taught but for
        a few misses: every gold passage cropped to its supporting sentences and the
        ``CROP_MISSES`` best-ranked other passages left whole (RAFT's distractors); and
        ``crop_chunk`` keeps each gold passage's supporting sentences and answers NONE for the
        selection's worst-ranked passage: one NONE a question, as a crop that drops a gold
        passage loses the answer while one that keeps a distractor loses only tokens. With the
        crop off the step never runs: nothing to teach it."""
        gold = annotations.require(example, "gold_passages", self.name)
        question = example.question
        chosen = self.selection(self.candidates(question, self.budget())[0], self.budget())
        found = [(c.chunk.id, format_passage(c.chunk.title, c.text)) for c in chosen]
        marked = annotations.marked_context_with_gold(found, gold, len(found))
        if not self.knobs.crop:
            return {"answer": [_answer_demo(example, [text for text, _ in marked])]}
        context, misses = [], CROP_MISSES
        for text, passage in marked:
            if passage is not None:
                kept = annotations.supporting_sentences(passage) or passage["text"]
                context.append(format_passage(passage["title"], kept))
            elif misses:
                context.append(text)
                misses -= 1
        # each passage as ``crop_selected`` gives it to the step: its text, without its title;
        # the dropped one second (a step taught on its first two demonstrations sees both)
        crops = [
            (p["text"], kept)
            for p in gold
            if (kept := annotations.supporting_sentences(p)) is not None
        ]
        others = [c.text for c in chosen if not annotations.is_gold(c.chunk.id, gold)]
        if crops and others:
            crops.insert(1, (others[-1], "NONE"))
        return {
            "answer": [_answer_demo(example, context)],
            "crop_chunk": [
                dspy.Example(question=question, passage=p, relevant_sentences=kept).with_inputs(
                    "question", "passage"
                )
                for p, kept in crops
            ],
        }

    def retrieved_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """``answer`` with the record's gold answer and the context the budget fills from the
        same pool with every gold passage left out (RAFT's examples without the golden
        document): the other candidates fill the knapsack in their place. With the crop on, the
        cropped context's shape without its gold passages: the ``CROP_MISSES`` best-ranked
        other passages, whole."""
        gold = annotations.require(example, "gold_passages", self.name)
        pool, _ = self.candidates(example.question, self.budget())
        others = [c for c in pool if not annotations.is_gold(c.chunk.id, gold)]
        chosen = self.selection(others, self.budget())
        if self.knobs.crop:
            chosen = chosen[:CROP_MISSES]
        context = [format_passage(c.chunk.title, c.text) for c in chosen]
        return {"answer": [_answer_demo(example, context)]}

    def filter_pool(
        self,
        question: str,
        pool: list[Candidate],
        wider: list[Candidate],
        budget: int,
        record: trace.Trace | None,
    ) -> list[Candidate]:
        """Drop rejected chunks, then add chunks that cover query entities the selection
        lacks: first the kept chunks the budget did not select (they rank better), then the
        ranks past the pool. An added chunk is forced into the selection."""
        rules = self.knobs.filter_rules
        query = chunk_filter.extract(question)
        metas = {id(c): chunk_filter.chunk_meta(c.chunk) for c in pool + wider}
        kept, reasons = [], {}
        for c in pool:
            reason = chunk_filter.drop_reason(query, metas[id(c)], rules)
            if reason:
                key = reason.split(":", 1)[0]
                reasons[key] = reasons.get(key, 0) + 1
            else:
                kept.append(c)
        chosen = self.selection(kept, budget)
        missing = chunk_filter.missing_entities(query, [metas[id(c)] for c in chosen])
        chosen_ids = {id(c) for c in chosen}
        spare = [c for c in kept if id(c) not in chosen_ids] + list(wider)
        added: list[Candidate] = []
        for entity in missing:
            if len(added) >= self.knobs.max_added:
                break
            for c in spare:
                meta = metas[id(c)]
                if (
                    all(c is not a for a in added)
                    and chunk_filter.covers(entity, meta)
                    and not chunk_filter.drop_reason(query, meta, rules)
                ):
                    c.forced = True
                    added.append(c)
                    break
        if record is not None:
            record.add_stage(
                "filter",
                candidates=len(pool),
                kept=len(kept),
                dropped=reasons,
                missing_entities=missing,
                added=[c.chunk.id for c in added],
            )
        kept_ids = {id(c) for c in kept}
        return kept + [c for c in added if id(c) not in kept_ids]

    def crop_selected(
        self, question: str, pool: list[Candidate], budget: int, record: trace.Trace | None
    ) -> None:
        """Crop what the budget would select; refill the freed budget; repeat until every
        selected chunk has been cropped once. A crop that does not consist of the chunk's own
        sentences is rejected (the chunk stays whole); "no sentence helps" drops the chunk
        (``crop_drops``)."""
        corpus = self.retriever.corpus
        counts = dict.fromkeys(("cropped", "unchanged", "dropped", "rejected"), 0)
        before = after = 0
        while True:
            todo = [c for c in self.selection(pool, budget) if not c.crop_tried]
            if not todo:
                break
            for c in todo:
                c.crop_tried = True
                proposal = self.crop_chunk(question=question, passage=c.text).relevant_sentences
                kept = verified_crop(
                    c.text,
                    str(proposal or ""),
                    self.knobs.crop_match,
                    self.knobs.crop_threshold,
                )
                before += c.tokens
                trace.check("crop_chunk", kept is not None, "not the chunk's own sentences")
                if kept is None:
                    counts["rejected"] += 1
                elif kept == DROP and self.knobs.crop_drops:
                    pool.remove(c)
                    counts["dropped"] += 1
                    continue
                elif kept and kept != c.text:
                    c.text = kept
                    c.tokens = corpus.count_tokens(format_passage(c.chunk.title, kept))
                    counts["cropped"] += 1
                else:
                    counts["unchanged"] += 1
                after += c.tokens
        if record is not None:
            record.add_stage("crop", **counts, tokens_before=before, tokens_after=after)


def _answer_demo(example: dspy.Example, context: list[str]) -> dspy.Example:
    demo = dspy.Example(context=context, question=example.question, answer=example.answer)
    return demo.with_inputs("context", "question")
