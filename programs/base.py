"""The common base of every strategy: an injected retriever, typed knobs with the papers'
defaults and their Optuna ranges, and a trace on every prediction (searches, turns, and every
LM call counted through DSPy's callbacks, whatever the LM class)."""

from __future__ import annotations

import copy
import time
from collections.abc import Collection
from contextlib import nullcontext
from typing import Any, ClassVar

import dspy

from netcast import trace
from netcast.corpus import format_passage
from netcast.errors import InputError
from netcast.models import usage
from netcast.models.factory import context_window, default_adapter, make_lm
from netcast.programs import knobs as knobs_mod
from netcast.programs.shared import rerank
from netcast.programs.shared.search import SearchSession
from netcast.retrievers.base import Hit, Retriever


class _BuiltForLM(type(dspy.Module)):
    """DSPy's module metaclass, and then: a program built with ``lm=`` has every step bound
    to it (``set_lm``, once the subclass has made its steps), so it is ready to call."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        program = super().__call__(*args, **kwargs)
        if kwargs.get("lm") is not None:
            program.set_lm(kwargs["lm"])
        return program


class NetcastProgram(dspy.Module, metaclass=_BuiltForLM):
    """Subclasses set ``name``, declare their knobs as a typed ``Knobs`` model (defaults = the
    papers' settings, with Optuna ranges), and implement ``forward(question)`` returning a
    ``dspy.Prediction`` with ``answer``, ``evidence`` (chunk ids) and ``context``.

    ``lm`` is the model the program runs on: its steps are bound to it (DSPy's ``set_lm``,
    done once the program is built), so it answers without ``dspy.configure``. It also sizes
    data-level defaults (a token budget of ``None`` is a quarter of its context window; with
    no ``lm``, the embedded model's window) and picks the adapter its replies are read with
    (``default_adapter``: JSON under a schema where the model takes one). Without ``lm`` the
    steps use DSPy's configured model (``dspy.context``). The model is not part of the saved
    program state: ``netcast.load`` binds the recipe's.
    """

    name: ClassVar[str] = ""
    Knobs: ClassVar[type[knobs_mod.Knobs]] = knobs_mod.Knobs
    knobs: knobs_mod.Knobs  # the checked knobs (an instance of Knobs): self.knobs.k

    def __init__(self, retriever: Retriever | None = None, *, lm: Any = None, **knobs: Any):
        super().__init__()
        # the checked knobs as the strategy's model: self.knobs.k
        self.knobs = knobs_mod.check(self.name, self.Knobs, knobs)
        self.retriever = retriever
        self.context_window = context_window(lm)
        # the adapter for lm's replies (JSON under a schema where lm takes one); an adapter the
        # caller sets with dspy.context wins
        self.adapter = default_adapter(lm)

    def __deepcopy__(self, memo: dict) -> NetcastProgram:
        """A copy (DSPy's optimizers copy the program they compile) shares the models its
        steps are bound to, as it shares its retriever: an embedded model copied would load
        its weights again."""
        for predictor in self.predictors():
            if predictor.lm is not None:
                memo.setdefault(id(predictor.lm), predictor.lm)
        copied = self.__class__.__new__(self.__class__)
        memo[id(self)] = copied
        copied.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return copied

    def dump_state(self, json_mode: bool = True) -> dict[str, Any]:
        """DSPy's state (prompts and demonstrations of each step) without the bound model: an
        artifact's model is its recipe's (``netcast.load`` binds it)."""
        steps = self.predictors()
        bound = [step.lm for step in steps]
        try:  # a model's own state is not asked for (a custom engine has none to give)
            for step in steps:
                step.lm = None
            return super().dump_state(json_mode=json_mode)
        finally:
            for step, lm in zip(steps, bound, strict=True):
                step.lm = lm

    @classmethod
    def knob_defaults(cls) -> dict[str, Any]:
        return knobs_mod.defaults(cls.Knobs)

    @classmethod
    def stored_knobs(cls, knobs: dict[str, Any]) -> dict[str, Any]:
        """A stored knob dict (a run directory's, a recipe's) with each alias read as its
        knob's name (``top_k`` saved before basic's retrieval depth became ``k``)."""
        return knobs_mod.renamed(cls.Knobs, knobs)

    @classmethod
    def most_calls(cls, knobs: knobs_mod.Knobs) -> int | None:
        """The predictions (calls of its steps) one question makes at most with ``knobs``,
        where the knobs alone bound them (a finetune's examples per training question, known
        before any call); None where they do not (a loop the model may end early or not)."""
        return None

    @classmethod
    def search_space(cls, trial, lm: Any = None) -> dict[str, Any]:
        """Knob values suggested by an Optuna ``trial`` (ranges sized for ``lm``)."""
        return knobs_mod.search_space(cls.Knobs, trial, context_window(lm))

    def annotated_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """Demonstrations for this strategy's steps (by predictor name) read from ``example``'s
        annotations, for ``netcast compile --teacher annotations`` (``optimize.annotations``).
        A strategy whose steps can be taught so overrides this; no model is called."""
        raise InputError(
            f"{self.name}: no annotation teacher for its steps; compile it with --teacher model"
        )

    def step_signature(
        self, step: str, signature: type[dspy.Signature], demo: dspy.Example, adapter: dspy.Adapter
    ) -> type[dspy.Signature]:
        """The signature ``step`` runs under when called with ``demo``'s inputs through
        ``adapter``, so that a training example is formatted as the call it teaches: its own
        ``signature``, unless the strategy changes it call by call."""
        return signature

    def step_adapter(self, step: str, adapter: dspy.Adapter) -> dspy.Adapter:
        """The adapter that formats ``step``'s calls: the program's (``adapter``), unless the
        strategy formats that step's prompt itself."""
        return adapter

    def retrieved_demos(self, example: dspy.Example) -> dict[str, list[dspy.Example]]:
        """Like ``annotated_demos``, but with a context retrieval builds without any gold
        passage (RAFT's share of examples without the golden document, for ``--teacher
        annotations --optimizer finetune``). None by default."""
        return {}

    def search(self, query: str, k: int, exclude: Collection[str] = ()) -> list[Hit]:
        """Retrieve and record the search in the trace."""
        if self.retriever is None:
            raise RuntimeError(f"{self.name}: no retriever; pass one to the constructor")
        start = time.perf_counter()
        hits = self.retriever.search(query, k, exclude)
        active = trace.current()
        if active is not None:
            ids = [h.chunk.id for h in hits]
            active.add_search(query, k, ids, time.perf_counter() - start)
        return hits

    @staticmethod
    def passages(hits: list[Hit]) -> list[str]:
        return [format_passage(h.chunk.title, h.chunk.text) for h in hits]

    def search_session(self, question: str, contextualizer: dspy.Module | None = None):
        """A per-question search step with the de-duplication and contextualization modules
        switched on by the ``dedup`` / ``contextualize`` knobs, the precision step by
        ``rerank_pool`` / ``rerank_signal`` (when the program has them; a model signal scores
        with the program's own model), and the link hop by ``links``."""
        knobs = self.knobs  # a strategy without one of these knobs has that module off
        use_memory = getattr(knobs, "contextualize", False) and contextualizer is not None
        return SearchSession(
            self.search,
            question,
            dedup=getattr(knobs, "dedup", False),
            contextualizer=contextualizer if use_memory else None,
            aux_lm=self.aux_lm(),
            rerank_pool=getattr(knobs, "rerank_pool", 0),
            rerank_signal=getattr(knobs, "rerank_signal", "retriever"),
            rerank_lm=self.own_lm(),
            links=getattr(knobs, "links", 0),
            corpus=getattr(self.retriever, "corpus", None),
        )

    def replay_session(self, question: str) -> SearchSession:
        """The search an annotation teacher replays a trajectory through: the run's
        de-duplication, precision step and link hop as the knobs set them, without what calls
        a model (a precision step whose signal does: ``likelihood``, ``verdict``; the
        contextualization memory)."""
        session = self.search_session(question)  # no contextualizer: no memory
        if rerank.needs_model(session.rerank_signal):
            session.rerank_pool = 0
        return session

    def own_lm(self):
        """The model the program's steps are bound to (``lm=``, ``set_lm``), else DSPy's
        configured one: what a rerank signal that calls a model scores with."""
        bound = next((p.lm for p in self.predictors() if p.lm is not None), None)
        return bound or dspy.settings.lm

    def aux_lm(self):
        """The auxiliary model named by the ``aux_model`` knob (made once), or None for the
        main model."""
        name = getattr(self.knobs, "aux_model", None)
        if not name:
            return None
        if getattr(self, "_aux", None) is None or self._aux.model != name:
            self._aux = make_lm(name)
        return self._aux

    def __call__(self, *args: Any, **kwargs: Any) -> dspy.Prediction:
        adapter = self.adapter if dspy.settings.adapter is None else None
        with (
            trace.recording() as recorded,
            usage.counting(self),
            dspy.context(adapter=adapter) if adapter is not None else nullcontext(),
        ):
            prediction = super().__call__(*args, **kwargs)
        # DSPy's BootstrapFinetune collects traces through a forward that returns (prediction,
        # DSPy's trace of its calls)
        answered = prediction[0] if isinstance(prediction, tuple) else prediction
        answered.trace = recorded.to_dict()
        return prediction
