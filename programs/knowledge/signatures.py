import dspy


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
    """Update the knowledge state from the new passages. List new facts that a passage states
    and that help answer the question, each ending with its passage id in parentheses, like
    "Paris is the capital of France (P2)". Then list what is still required to answer the
    question; return an empty list when nothing more is needed."""

    question: str = dspy.InputField()
    known: list[str] = dspy.InputField(desc="facts already known")
    required: list[str] = dspy.InputField(desc="information that was missing")
    passages: list[str] = dspy.InputField(desc="new passages, each '[P1] title: text'")
    new_facts: list[str] = dspy.OutputField(desc="facts with their passage id, e.g. '... (P2)'")
    still_required: list[str] = dspy.OutputField(desc="remaining gaps, [] if none")


class FilterContext(dspy.Signature):
    """Copy, word for word, the segments of the passages that support what is known or help
    answer the question. Start each segment with its passage id, like "[P2] segment". Do not
    rephrase."""

    question: str = dspy.InputField()
    known: list[str] = dspy.InputField()
    passages: list[str] = dspy.InputField(desc="passages, each '[P1] title: text'")
    segments: list[str] = dspy.OutputField(desc="'[P#] verbatim segment' items")
