"""Knobs are typed: wrong types, unknown names and values outside a knob's choices are refused
when a program is built, with one line naming the knob; every program's search space comes from
its declared ranges."""

import json

import optuna
import pytest
from pydantic import ValidationError

from netcast.errors import InputError
from netcast.programs import PROGRAMS, BasicRAG, OneShot
from netcast.programs.knobs import parse_pairs


def one_line_error(build):
    with pytest.raises(InputError) as err:
        build()
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_wrong_type_is_refused_naming_the_knob(bm25):
    message = one_line_error(lambda: BasicRAG(bm25, top_k="abc"))
    assert message.startswith("basic: knob 'top_k' = 'abc'")
    assert "top_k" in one_line_error(lambda: BasicRAG(bm25, top_k=True))  # strict: not an int
    assert "top_k" in one_line_error(lambda: BasicRAG(bm25, top_k=0))  # below its minimum


def test_an_unknown_knob_is_refused_naming_it_and_the_valid_ones(bm25):
    message = one_line_error(lambda: BasicRAG(bm25, nope=1))
    assert message == (
        "basic: unknown knob 'nope'; knobs are top_k, chain_of_thought, rerank_pool, "
        "rerank_signal, links"
    )


def test_a_value_outside_a_knobs_choices_is_refused(bm25):
    message = one_line_error(lambda: OneShot(bm25, selector="fast"))
    assert message.startswith("one_shot: knob 'selector' = 'fast'")
    assert "'exact' or 'greedy'" in message


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_defaults_are_the_knobs_a_program_gets(name, bm25):
    cls = PROGRAMS[name]
    assert cls(bm25).knobs.model_dump() == cls.knob_defaults()
    assert cls(bm25, **cls.knob_defaults()).knobs.model_dump() == cls.knob_defaults()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_program_holds_its_knobs_as_its_model_and_rebuilds_from_their_stored_dict(name, bm25):
    """``program.knobs`` is the strategy's Knobs model (read by attribute, fixed once built);
    its dict, as a recipe stores it in JSON, builds the same program knobs again."""
    cls = PROGRAMS[name]
    program = cls(bm25)
    assert type(program.knobs) is cls.Knobs
    first = next(iter(cls.Knobs.model_fields))
    assert getattr(program.knobs, first) == cls.knob_defaults()[first]
    with pytest.raises(ValidationError, match="frozen"):
        setattr(program.knobs, first, cls.knob_defaults()[first])
    stored = json.loads(json.dumps(program.knobs.model_dump()))
    assert cls(bm25, **stored).knobs == program.knobs


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_search_space_from_a_fixed_trial_gives_knobs_the_program_accepts(name, bm25):
    cls = PROGRAMS[name]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    for _ in range(5):
        sampled = cls.search_space(study.ask())
        assert sampled  # every strategy has something to tune
        fixed = cls.search_space(optuna.trial.FixedTrial(sampled))
        assert fixed == sampled
        program = cls(bm25, **fixed)
        assert {k: getattr(program.knobs, k) for k in fixed} == fixed
        assert set(program.knobs.model_dump()) == set(cls.knob_defaults())


class SmallModel:
    """An LM whose engine runs with a 1,024-token context window."""

    class engine:
        n_ctx = 1024


def test_the_lm_sizes_the_token_budget_and_its_range(bm25, monkeypatch):
    monkeypatch.delenv("NETCAST_N_CTX", raising=False)
    assert OneShot(bm25).budget() == 2048  # the embedded model's 8,192 / 4
    assert OneShot(bm25, lm=SmallModel()).budget() == 256
    assert OneShot(bm25, lm=SmallModel(), token_budget=300).budget() == 300
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    small = [OneShot.search_space(study.ask(), SmallModel())["token_budget"] for _ in range(20)]
    large = [OneShot.search_space(study.ask())["token_budget"] for _ in range(20)]
    assert all(256 <= b <= 512 for b in small)
    assert all(256 <= b <= 4096 for b in large) and max(large) > 512


def test_parse_pairs_reads_json_values_and_keeps_other_text():
    pairs = ["top_k=3", "selector=exact", "crop=true", 'filter_rules=["text_year"]', "x=a=b"]
    assert parse_pairs(pairs) == {
        "top_k": 3,
        "selector": "exact",
        "crop": True,
        "filter_rules": ["text_year"],
        "x": "a=b",
    }
    assert parse_pairs(["top_k=abc"]) == {"top_k": "abc"}  # refused when the program is built
    for bad in ("top_k", "=3"):
        with pytest.raises(InputError, match="--set expects knob=value"):
            parse_pairs([bad])
