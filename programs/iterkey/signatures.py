"""IterKey's LLM steps (the paper's Table 13 prompts as Signatures): keywords for BM25
(generate, regenerate), the answer from the documents and the model's own knowledge, and the
True/False validation of that answer."""

import dspy


class GenerateKeywords(dspy.Signature):
    """Generate search keywords for a BM25 search engine that will retrieve documents answering
    the question: the names, entities, facts and synonyms the answer documents likely contain.
    Return them as a JSON list of short strings."""

    question: str = dspy.InputField()
    keywords: str = dspy.OutputField(desc='a JSON list, e.g. ["term one", "term two"]')


class RegenerateKeywords(dspy.Signature):
    """The previous keywords retrieved documents that did not give a verified answer to the
    question. Generate better keywords for a BM25 search engine: keep the useful ones, drop the
    misleading ones, add names, entities and synonyms the answer documents likely contain.
    Return them as a JSON list of short strings."""

    question: str = dspy.InputField()
    previous_keywords: list[str] = dspy.InputField()
    keywords: str = dspy.OutputField(desc='a JSON list, e.g. ["term one", "term two"]')


class RegenerateKeywordsFromDocument(dspy.Signature):
    """The previous keywords did not give a verified answer to the question. Read this one
    retrieved document and generate better keywords for a BM25 search engine: terms that would
    find the documents still needed. Return them as a JSON list of short strings."""

    question: str = dspy.InputField()
    previous_keywords: list[str] = dspy.InputField()
    document: str = dspy.InputField()
    keywords: str = dspy.OutputField(desc='a JSON list, e.g. ["term one", "term two"]')


class AnswerFromDocuments(dspy.Signature):
    """Answer the question. Below are some documents that may contain information relevant to
    the question: consider the information in these documents while combining it with your own
    knowledge to answer the question accurately. Provide a clear and concise answer, a few
    words, with no additional text."""

    context: list[str] = dspy.InputField(desc="retrieved documents, each 'title: text'")
    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="a short answer, a few words at most")


class ValidateAnswer(dspy.Signature):
    """Judge whether the answer to the question is correct and supported by the documents.
    Reply True only if the documents support it; otherwise False."""

    question: str = dspy.InputField()
    documents: list[str] = dspy.InputField()
    answer: str = dspy.InputField()
    is_correct: bool = dspy.OutputField(desc="True or False")
