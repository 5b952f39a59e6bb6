"""The knowledge-aware agent's LLM steps: plan a query, update the knowledge state (revise what is
Known against new passages, list what is still Required), filter the context.

The lists the steps write are bounded in their JSON schema (``bounded_list``), and extract and
filter have more room than the default 384 new tokens: a reply cut at its token limit is invalid
JSON, a parse failure that leaves the knowledge state or the context as it was. (Unbounded, with
384 tokens, ``extract`` failed to parse in 29 of 52 calls on the indicative tier, and DSPy had
warned of truncated replies 56 times over 32 knowledge questions.)
"""

import dspy

from netcast.programs.shared.lists import bounded_list

Facts = bounded_list("Facts", 8)  # known facts
Gaps = bounded_list("Gaps", 4)  # open gaps
Segments = bounded_list("Segments", 6)  # filtered context segments
EXTRACT_TOKENS = 768
FILTER_TOKENS = 768


class PlanQuery(dspy.Signature):
    """Plan the next search. Given what is known and what is still required to answer the
    question, write one short search query for the most useful missing piece, preferably the
    focus gap. Do not repeat an earlier query."""

    question: str = dspy.InputField()
    known: list[str] = dspy.InputField(desc="verified facts so far")
    required: list[str] = dspy.InputField(desc="information still missing")
    focus: str = dspy.InputField(desc="the gap to work on now")
    history: list[str] = dspy.InputField(desc="earlier queries; do not repeat them")
    query: str = dspy.OutputField()


class ExtractKnowledge(dspy.Signature):
    """Update the knowledge state with the new passages. Check each known fact against them:
    keep it if it still holds, correct or drop it if a passage contradicts it. Add the new
    facts a passage states that help answer the question. Every fact ends with the id of the
    passage that supports it in parentheses, like "Paris is the capital of France (P2)". Then
    list what is still required to answer the question; return an empty list when nothing
    more is needed."""

    question: str = dspy.InputField()
    known: list[str] = dspy.InputField(desc="facts known so far, each with its passage id")
    required: list[str] = dspy.InputField(desc="information that was missing")
    passages: list[str] = dspy.InputField(desc="new passages, each '[P1] title: text'")
    known_facts: Facts = dspy.OutputField(
        desc="every fact known now (kept, corrected and new), each ending '(P#)'"
    )
    still_required: Gaps = dspy.OutputField(desc="remaining gaps, [] if none")


class FilterContext(dspy.Signature):
    """Copy, word for word, the segments of the passages that support a known fact or address
    what is still required. Start each segment with its passage id, like "[P2] segment". Do not
    rephrase; leave out everything else."""

    question: str = dspy.InputField()
    known: list[str] = dspy.InputField()
    required: list[str] = dspy.InputField(desc="information still missing")
    passages: list[str] = dspy.InputField(desc="passages, each '[P1] title: text'")
    segments: Segments = dspy.OutputField(desc="'[P#] verbatim segment' items")
