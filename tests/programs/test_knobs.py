"""Knobs are typed: wrong types, unknown names and values outside a knob's choices are refused
when a program is built, with one line naming the knob; every program's search space comes from
its declared ranges."""

import json
from pathlib import Path

import optuna
import pytest
from pydantic import ValidationError

from netcast.artifacts import load_program_state, read_artifact
from netcast.errors import InputError
from netcast.programs import PROGRAMS, BasicRAG, OneShot
from netcast.programs.knobs import parse_pairs
from netcast.programs.registry import stored_knobs
from netcast.session import build_program


def one_line_error(build):
    with pytest.raises(InputError) as err:
        build()
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_wrong_type_is_refused_naming_the_knob(bm25):
    message = one_line_error(lambda: BasicRAG(bm25, k="abc"))
    assert message.startswith("basic: knob 'k' = 'abc'")
    assert "'k'" in one_line_error(lambda: BasicRAG(bm25, k=True))  # strict: not an int
    assert "'k'" in one_line_error(lambda: BasicRAG(bm25, k=0))  # below its minimum
    # a knob given by its alias is named as it was given
    assert one_line_error(lambda: BasicRAG(bm25, top_k="abc")).startswith("basic: knob 'top_k'")


def test_an_unknown_knob_is_refused_naming_it_and_the_valid_ones(bm25):
    message = one_line_error(lambda: BasicRAG(bm25, nope=1))
    assert message == (
        "basic: unknown knob 'nope'; knobs are k (or top_k), chain_of_thought, rerank_pool, "
        "rerank_signal, links, second_hop"
    )


# a concept's other names, none of them a knob's own name any more (each is an alias)
RETRIEVAL_DEPTH = {"top_k", "passages_per_hop"}
LOOP_LIMIT = {"max_turns", "max_iters", "max_hops"}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_one_name_per_concept_k_for_retrieval_depth_max_steps_for_the_loop(name):
    fields = set(PROGRAMS[name].Knobs.model_fields)
    assert not fields & (RETRIEVAL_DEPTH | LOOP_LIMIT)
    aliases = PROGRAMS[name].Knobs.aliases()
    assert all(aliases[a] == "k" for a in RETRIEVAL_DEPTH & set(aliases))
    assert all(aliases[a] == "max_steps" for a in LOOP_LIMIT & set(aliases))
    # every strategy with a loop limits it by max_steps; every one but one_shot (a token
    # budget) and basic's rerank pool retrieves k passages a search
    if name != "one_shot":
        assert "k" in fields
    if name not in ("basic", "one_shot"):
        assert "max_steps" in fields


@pytest.mark.parametrize(
    ("name", "given", "knobs"),
    [
        ("basic", {"top_k": 3}, {"k": 3}),
        ("multihop", {"passages_per_hop": 2, "max_hops": 1}, {"k": 2, "max_steps": 1}),
        ("iterative", {"max_turns": 3}, {"max_steps": 3}),
        ("combined", {"max_turns": 3}, {"max_steps": 3}),
        ("search_r1", {"max_turns": 2}, {"max_steps": 2}),
        ("iterkey", {"max_iters": 2}, {"max_steps": 2}),
    ],
)
def test_a_papers_own_name_is_an_alias_of_its_knob(name, given, knobs, bm25):
    """Constructor keywords, and a stored recipe's dict (JSON, as committed artifacts keep
    them), build the same program under the alias as under the knob's name."""
    cls = PROGRAMS[name]
    by_alias, by_name = cls(bm25, **given), cls(bm25, **knobs)
    assert by_alias.knobs == by_name.knobs
    assert {k: getattr(by_alias.knobs, k) for k in knobs} == knobs
    assert cls(bm25, **json.loads(json.dumps(given))).knobs == by_name.knobs
    assert cls.Knobs(**given) == by_name.knobs  # the model itself reads the alias too


def test_a_knob_given_under_both_names_is_refused_in_one_line(bm25):
    message = one_line_error(lambda: BasicRAG(bm25, top_k=3, k=4))
    assert message == "basic: knob 'k' is given twice, as 'k' and as 'top_k'"


@pytest.mark.parametrize(
    "knobs", [{"k": 1, "max_steps": 3}, {"passages_per_hop": 1, "max_hops": 3}]
)
def test_multihop_runs_its_hops_with_its_passages_under_either_name(knobs, scripted_lm, bm25):
    """``k=1, max_steps=3``, or as the tutorial writes it, ``SimplifiedBaleen(
    passages_per_hop=1, max_hops=3)``: three query steps, one passage retrieved by each."""
    lm, _ = scripted_lm(
        lambda prompt: {"reasoning": "so", "query": "capital of France", "answer": "Paris"}
    )
    program = PROGRAMS["multihop"](bm25, lm=lm, **knobs)
    prediction = program(question="What is the capital of France?")
    assert len(program.generate_query) == 3
    searches = prediction.trace["searches"]
    assert len(searches) == 3 and all(s["k"] == 1 for s in searches)


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


ARTIFACTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "artifacts"


@pytest.mark.parametrize("artifact", sorted(p.parent.name for p in ARTIFACTS.glob("*/recipe.json")))
def test_every_committed_artifact_builds_its_program_under_the_current_names(artifact, bm25):
    """Recipes saved before the renames (``top_k``, ``max_turns``, ...) build the same program:
    each stored value lands on its knob, and the saved prompts and demonstrations load."""
    directory = ARTIFACTS / artifact
    recipe, _, _ = read_artifact(directory)
    program = build_program(recipe["program"], bm25, recipe["knobs"])
    current = stored_knobs(recipe["program"], recipe["knobs"])
    assert program.knobs.model_dump() == {**program.knob_defaults(), **current}
    load_program_state(program, directory, allow_pickle=False)
