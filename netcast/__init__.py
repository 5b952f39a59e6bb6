"""netcast: retrieval strategies for RAG question answering as compiled DSPy programs.

Importing netcast changes nothing in the process: offline defaults are applied only where they
belong (the embedded model's own loading, the command line when no model is given)."""

from netcast.models import configure, make_lm, token_counter

__version__ = "0.1.0"
__all__ = ["__version__", "configure", "load", "make_lm", "token_counter"]


def load(directory, model=None, retriever=None, allow_pickle=False):
    """Load a compiled program from an artifact directory, bound to its own model (see
    ``netcast.session.load``)."""
    from netcast.session import load as _load

    return _load(directory, model=model, retriever=retriever, allow_pickle=allow_pickle)
