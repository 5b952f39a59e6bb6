"""Basic RAG: retrieve the top-k chunks for the question, answer from them.

``rerank_pool`` and ``rerank_signal`` add a precision step (``programs.shared.rerank``): fetch a
pool of ``rerank_pool`` candidates, keep the ``k`` the signal scores best. The defaults
(no pool, the retriever's order) are plain top-k retrieval, with the same prompts.

``links`` adds a link hop without a model (``programs.shared.links``): up to ``links`` passages
whose titles the top-k passages mention (the first passage's mentions first) join the context
after them. Off by default (plain top-k); it is in the search space, so a joint compile can
switch it on where it measures better.

``second_hop`` adds a written second hop (a model call): a query step reads the question and
the passages found so far and writes the search for the passage still missing (its title, the
bridge entity), whose ``second_hop`` best passages not already there join the context. Its
annotation teacher's target is that missing gold passage's title, no model call
(``annotated_demos``): what EfficientRAG's tagger copies into its next query. Off by default."""

from __future__ import annotations

import dspy

from netcast.corpus import doc_id_of_chunk
from netcast.programs import knobs
from netcast.programs.base import NetcastProgram
from netcast.programs.basic.signatures import WriteNextQuery
from netcast.programs.registry import register
from netcast.programs.shared import annotations
from netcast.programs.shared.links import follow
from netcast.programs.shared.rerank import rerank
from netcast.signatures import ANSWER_TOKENS, AnswerQuestion


@register
class BasicRAG(NetcastProgram):
    name = "basic"
    knobs: Knobs  # the checked knobs (the model below), read as self.knobs.<name>

    class Knobs(knobs.Knobs):
        # passages retrieved (``top_k``, as the papers' baselines call it, is an alias)
        k: int = knobs.knob(5, search=knobs.IntRange(1, 10), ge=1, aliases=("top_k",))
        chain_of_thought: bool = knobs.knob(False, search=knobs.Choice((False, True)))
        # the precision step (candidates fetched before keeping k) and the link hop
        # (passages the k ones name by title, added after them): see programs.knobs
        rerank_pool: knobs.RerankPool = 0
        rerank_signal: knobs.Signal = "retriever"
        links: knobs.Links = knobs.knob(0, search=knobs.IntRange(0, 3))
        # passages a written query adds after the first retrieval (0: no second hop)
        second_hop: int = knobs.knob(0, ge=0, le=10)

    def __init__(self, retriever=None, *, lm=None, **knob_values):
        super().__init__(retriever, lm=lm, **knob_values)
        if self.knobs.chain_of_thought:
            self.answer = dspy.ChainOfThought(AnswerQuestion)
        else:  # a short span: the output is capped (reasoning, when on, is not)
            self.answer = dspy.Predict(AnswerQuestion, max_tokens=ANSWER_TOKENS)
        if self.knobs.second_hop:
            self.write_query = dspy.Predict(WriteNextQuery, max_tokens=ANSWER_TOKENS)

    @classmethod
    def most_calls(cls, knobs: Knobs) -> int:
        # the answer step and the second hop's query (the precision step scores passages
        # outside any step)
        return 1 + (1 if knobs.second_hop else 0)

    def forward(self, question: str) -> dspy.Prediction:
        k, signal = self.knobs.k, self.knobs.rerank_signal
        if self.knobs.rerank_pool == 0 and signal == "retriever":
            hits = self.search(question, k)
        else:
            pool = self.search(question, max(k, self.knobs.rerank_pool))
            lm = self.own_lm()
            hits = rerank(question, pool, signal, k, lm=lm)
        hits = self.hop(question, self.linked(hits))
        context = self.passages(hits)
        answer = self.answer(context=context, question=question).answer
        return dspy.Prediction(answer=answer, evidence=[h.chunk.id for h in hits], context=context)

    def linked(self, hits: list) -> list:
        """The context's hits and, after them, up to ``links`` passages they name by title."""
        if self.knobs.links == 0:
            return hits
        return hits + follow(hits, self.retriever.corpus, len(hits), self.knobs.links)

    def hop(self, question: str, hits: list) -> list:
        """``hits`` and, with ``second_hop``, the passages the written query finds after them."""
        if not self.knobs.second_hop:
            return hits
        query = self.write_query(context=self.passages(hits), question=question).query
        seen = [h.chunk.id for h in hits]
        return hits + self.search(query, self.knobs.second_hop, exclude=seen)

    def annotated_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """``answer`` reads the record's gold answer from the context retrieval builds for its
        question, gold passages swapped in for the last others where retrieval missed them.
        With ``second_hop``, ``write_query`` reads the first retrieval and writes the title of
        the gold passage it missed (``next_gold``), and the answer's context is the first
        retrieval plus what that query finds, gold swapped in where it still misses."""
        gold = annotations.require(example, "gold_passages", self.name)
        found = self._retrieved(example.question)
        demos: dict[str, list[dspy.Example]] = {}
        if self.knobs.second_hop:
            query = next_gold(found, gold)["title"]
            written = dspy.Example(
                context=[p for _, p in found], question=example.question, query=query
            )
            demos["write_query"] = [written.with_inputs("context", "question")]
            seen = [cid for cid, _ in found]
            more = self.retriever.search(query, self.knobs.second_hop, seen)
            found += [(h.chunk.id, p) for h, p in zip(more, self.passages(more), strict=True)]
        context = annotations.context_with_gold(found, gold, len(found))
        demo = dspy.Example(context=context, question=example.question, answer=example.answer)
        return {**demos, "answer": [demo.with_inputs("context", "question")]}

    def retrieved_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """``answer`` with the record's gold answer and a context retrieval builds without any
        gold passage (RAFT's examples without the golden document): the top-k passages that
        are not gold (the next ones retrieval ranks stand in for the gold ones), then their link
        hop, which passes over the gold passages they name."""
        gold = annotations.require(example, "gold_passages", self.name)
        search = self.retriever.search
        hits = annotations.top_without_gold(search, example.question, self.knobs.k, gold)
        if self.knobs.links:
            not_gold = [f"{p['id']}#0" for p in gold]  # follow() compares their documents
            hits += follow(hits, self.retriever.corpus, len(hits), self.knobs.links, not_gold)
        demos: dict[str, list[dspy.Example]] = {}
        if self.knobs.second_hop:  # the query for a gold passage the context lacks, and the
            # answer over what it finds beside no gold passage
            context = self.passages(hits)
            query = next_gold(list(zip([h.chunk.id for h in hits], context, strict=True)), gold)
            query = query["title"]
            written = dspy.Example(context=context, question=example.question, query=query)
            demos["write_query"] = [written.with_inputs("context", "question")]
            wanted = self.knobs.second_hop + len(gold)
            more = self.retriever.search(query, wanted, [h.chunk.id for h in hits])
            hits += [h for h in more if not annotations.is_gold(h.chunk.id, gold)][
                : self.knobs.second_hop
            ]
        context = self.passages(hits)
        demo = dspy.Example(context=context, question=example.question, answer=example.answer)
        return {**demos, "answer": [demo.with_inputs("context", "question")]}

    def _retrieved(self, question: str) -> list[tuple[str, str]]:
        """(chunk id, passage) of the context retrieval builds for ``question`` (top-k, then
        the link hop; the precision step, which may call a model, is not run)."""
        hits = self.linked(self.retriever.search(question, self.knobs.k))
        return [(h.chunk.id, p) for h, p in zip(hits, self.passages(hits), strict=True)]


def next_gold(found: list[tuple[str, str]], gold: list[dict]) -> dict:
    """The gold passage the second hop should search for after retrieval ``found`` ((chunk id,
    passage) pairs): a missing one whose title a found passage names (the bridge entity),
    else the first missing one; with none missing, the one retrieval ranked last (the query
    that keeps it within reach)."""
    have = [doc_id_of_chunk(cid) for cid, _ in found]
    missing = [p for p in gold if p["id"] not in have]
    text = " ".join(passage for _, passage in found).lower()
    named = [p for p in missing if p["title"].lower() in text]
    if named or missing:
        return (named or missing)[0]
    return max(gold, key=lambda p: have.index(p["id"]))
