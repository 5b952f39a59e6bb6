"""DSPy's multi-hop question answering program, a baseline: the intro tutorial's
``SimplifiedBaleen`` ("Program 2: Multi-Hop Search"), as DSPy users know it.

Source: DSPy's intro notebook (github.com/stanfordnlp/dspy, ``intro.ipynb``, until commit
f5bc29b4d of November 2024; the same program is kept in the repository's
``tests/examples/test_baleen.py``, and ``docs/docs/learn/programming/7-assertions.md`` extends
it). Each hop ``h`` has its own query writer, ``ChainOfThought(GenerateSearchQuery)`` (context,
question -> query); its query retrieves ``k`` passages (the tutorial's ``passages_per_hop``),
which join the context de-duplicated (``deduplicate(context + passages)``); after exactly
``max_steps`` hops (the tutorial's ``max_hops``; no early stop) a
``ChainOfThought(GenerateAnswer)`` answers from the context. The defaults are the tutorial's,
``SimplifiedBaleen(passages_per_hop=3, max_hops=2)``; its two names are accepted as aliases.
The later multi-hop tutorial (``docs/docs/tutorials/multihop_search``, ``Hop``: num_docs=10,
num_hops=4, notes and titles for HoVer claims) is another task and not this program; its 4
hops bound ``max_steps``'s range.

Deviations (none is a knob: each keeps the tutorial's behaviour where it defines one):

- the Signatures are typed (``context: list[str]``, passages as ``title: text``); their
  instructions and field descriptions are the tutorial's;
- passages are de-duplicated by chunk id (the tutorial compares passage texts; a chunk's text is
  unique here), and a retrieval is not refilled: a hop that finds only passages already in the
  context adds nothing, as in the tutorial;
- a query step whose reply cannot be read, or that writes an empty query, searches the question
  instead (counted as a fallback of that hop's step); the tutorial's program would fail;
- the retriever is netcast's (BM25 by default); the tutorial searched ColBERTv2 over the 2017
  Wikipedia abstracts.
"""

from __future__ import annotations

import dspy
from dspy.utils.exceptions import AdapterParseError

from netcast import trace
from netcast.corpus import doc_id_of_chunk
from netcast.programs import knobs
from netcast.programs.base import NetcastProgram
from netcast.programs.multihop.signatures import GenerateAnswer, GenerateSearchQuery
from netcast.programs.registry import register
from netcast.programs.shared import annotations
from netcast.signatures import ANSWER_TOKENS


@register
class MultiHop(NetcastProgram):
    name = "multihop"
    knobs: Knobs  # the checked knobs (the model below), read as self.knobs.<name>

    class Knobs(knobs.Knobs):
        # the tutorial's SimplifiedBaleen(passages_per_hop=3, max_hops=2), its names aliases;
        # ranges up to the Hop tutorial's 4 hops, and up to 6 passages a hop (24 passages at
        # most fit the embedded model's 8,192-token window with room for the answer's reasoning)
        max_steps: int = knobs.knob(2, search=knobs.IntRange(1, 4), ge=1, aliases=("max_hops",))
        k: int = knobs.knob(3, search=knobs.IntRange(1, 6), ge=1, aliases=("passages_per_hop",))
        # False: every step writes its output with no reasoning first (Predict; the answer
        # capped as basic's is), not the tutorial's ChainOfThought. The annotations give no
        # reasoning, so only this way can `--teacher annotations --optimizer finetune` train
        # the query writers (a ChainOfThought step's demonstrations lack an output)
        reasoning: bool = True

    def __init__(self, retriever=None, *, lm=None, **knob_values):
        super().__init__(retriever, lm=lm, **knob_values)
        # one query writer per hop, as in the tutorial (each is compiled on its own)
        step = dspy.ChainOfThought if self.knobs.reasoning else dspy.Predict
        self.generate_query = [step(GenerateSearchQuery) for _ in range(self.knobs.max_steps)]
        self.generate_answer = (
            dspy.ChainOfThought(GenerateAnswer)
            if self.knobs.reasoning
            else dspy.Predict(GenerateAnswer, max_tokens=ANSWER_TOKENS)
        )

    @classmethod
    def most_calls(cls, knobs: Knobs) -> int:
        return knobs.max_steps + 1  # every hop's query (no early stop), then the answer

    def forward(self, question: str) -> dspy.Prediction:
        k = self.knobs.k
        session = self.search_session(question)
        record = trace.current()
        context: list[str] = []
        evidence: list[str] = []  # chunk ids of the context, in the order they entered
        for hop, write_query in enumerate(self.generate_query):
            try:
                query = str(write_query(context=list(context), question=question).query or "")
            except AdapterParseError:
                query = ""
            fallback = not query.strip()
            if fallback:  # unreadable or empty: the hop searches the question
                trace.count(f"generate_query[{hop}]", "fallbacks")
            query = question if fallback else query.strip()
            hits = session.search(query, k)
            added = []
            for hit, passage in zip(hits, self.passages(hits), strict=True):
                if hit.chunk.id not in evidence:  # deduplicate(context + passages)
                    evidence.append(hit.chunk.id)
                    context.append(passage)
                    added.append(hit.chunk.id)
            if record is not None:
                record.add_turn(
                    turn=hop + 1,
                    action="search",
                    query=query,
                    fallback=fallback,
                    returned=[h.chunk.id for h in hits],
                    added=added,
                )
        answer = self.generate_answer(context=context, question=question).answer
        return dspy.Prediction(answer=answer, evidence=evidence, context=context)

    def annotated_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """From the record's annotations: hop ``h``'s query writer, shown the context the hops
        before it collected with the queries taught for them, searches the next gold passage
        that context lacks (by its title, or the MuSiQue sub-question it answers, in the order
        ``annotations.gold_queries`` gives); ``generate_answer`` gives the gold answer from the
        context those hops collected, gold passages swapped in for the last others where
        retrieval missed them. Not taught: the reasoning before each output (ChainOfThought's;
        the demos have none: with ``reasoning`` False the steps have none either), and a hop
        once every gold passage is in the context or has had its query (a record with two
        gold passages teaches hops 1 and 2 at most)."""
        gold = annotations.require(example, "gold_passages", self.name)
        question, k = example.question, self.knobs.k
        targets = annotations.gold_queries(example)
        found: list[tuple[str, str]] = []  # (chunk id, passage) collected by the taught hops
        asked: set[str] = set()  # gold passages a taught query has gone after
        demos: dict[str, list[dspy.Example]] = {}
        for hop in range(self.knobs.max_steps):
            have = {doc_id_of_chunk(cid) for cid, _ in found}
            todo = [(p, q) for p, q in targets if p["id"] not in have | asked]
            if not todo:
                break
            passage, query = todo[0]
            demo = dspy.Example(context=[text for _, text in found], question=question, query=query)
            demos[f"generate_query[{hop}]"] = [demo.with_inputs("context", "question")]
            asked.add(passage["id"])
            hits = self.retriever.search(query, k)
            seen = {cid for cid, _ in found}
            found += [
                (h.chunk.id, text)
                for h, text in zip(hits, self.passages(hits), strict=True)
                if h.chunk.id not in seen
            ]
        context = annotations.context_with_gold(found, gold, len(found))
        final = dspy.Example(context=context, question=question, answer=example.answer)
        demos["generate_answer"] = [final.with_inputs("context", "question")]
        return demos
