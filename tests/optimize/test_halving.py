"""The race's successive halving over arms (strategy x grid point x demonstration source) with a
scripted model: ``basic`` (one answer call a question) against ``multihop`` (two query calls
and a chain-of-thought answer). ``basic``'s grid here is its retrieval depth ``k`` (1, 3, 5, 7,
9; the defaults 5 first, then 3): over a corpus of capitals, every one of them is given as many
passages, so a reader can tell the arm it runs in by the passages in its context."""

import json
import re
from types import SimpleNamespace

import dspy
import pytest

from helpers import DOCS, WordCounter, capitals_file, last_question
from netcast.corpus import Corpus, Document
from netcast.data import load_dataset
from netcast.optimize import halving
from netcast.optimize import race as race_mod
from netcast.optimize.budget import CallBudget
from netcast.optimize.halving import CHUNK, Arm, Lane, fewest, first_rungs, halve, ladder
from netcast.optimize.joint import grid_points, knob_grid
from netcast.optimize.race import StrategyRace, candidates
from netcast.optimize.settings import RaceSettings
from netcast.programs import PROGRAMS, NetcastProgram, get_program
from netcast.programs import knobs as knobs_mod
from netcast.retrievers.bm25 import BM25Retriever

FIXED = {"chain_of_thought": False, "links": 0, "max_steps": 2}
NONE = ("none",)


CAPITALS = ["Rome", "Madrid", "Vienna", "Lisbon", "Warsaw", "Prague", "Dublin", "Oslo"]


@pytest.fixture
def bm25():
    """The tiny corpus and eight more capitals: a search for the capital of France finds at
    least nine passages."""
    more = [Document(c.lower(), c, f"{c} is a capital city of Europe.") for c in CAPITALS]
    return BM25Retriever(Corpus.from_documents([*DOCS, *more], WordCounter()))


def is_multihop(prompt: str) -> bool:
    return "[[ ## reasoning ## ]]" in prompt


def passages(prompt: str) -> int:
    """How many passages basic's reader was given."""
    context = re.findall(r"\[\[ ## context ## \]\]\n(\[.*?\])\n", prompt)
    return len(json.loads(context[-1]))


def number(prompt: str) -> int:
    return int(re.match(r"Question (\d+):", last_question(prompt)).group(1))


def train(tmp_path, n=48):  # 24 training questions, every one validating (demos none)
    return load_dataset(capitals_file(tmp_path / "capitals.jsonl", n), "train").examples


def race(lm, bm25, examples, workdir=None, **settings):
    tele = StrategyRace(RaceSettings(demos=NONE, first=10, **settings), lm=lm, workdir=workdir)
    with dspy.context(lm=lm):
        tele.compile(candidates(["basic", "multihop"], bm25, FIXED, lm), trainset=examples)
    return tele.result


def arm_rows(result, program, k):
    return [r for r in result.table if r["program"] == program and r["knobs"]["k"] == k]


def test_basic_grid_order_is_defaults_then_k_3():
    # what the tests below rely on: the arm after basic's defaults is k 3
    cls = get_program("basic")
    grid = knob_grid(cls, None, {"chain_of_thought": False, "links": 0})
    points = grid_points(grid, ["none"], cls.knob_defaults())
    assert [p["k"] for p in points[:2]] == [5, 3]


def test_a_strategy_whose_defaults_trail_but_whose_second_grid_point_leads_wins(
    scripted_lm, bm25, tmp_path
):
    # basic is right only with three passages (k 3, its second arm); at its defaults it is
    # wrong throughout and trails multihop (right on all but a few questions) at p < 0.05.
    # The old race dropped basic on its first rung and never tried its grid.
    def respond(prompt):
        if is_multihop(prompt):
            answer = "Berlin" if number(prompt) % 7 == 0 else "Paris"
            return {"reasoning": "so", "query": "capital France", "answer": answer}
        return {"answer": "Paris" if passages(prompt) == 3 else "Berlin"}

    lm, _ = scripted_lm(respond)
    result = race(lm, bm25, train(tmp_path))
    (defaults,) = arm_rows(result, "basic", 5)
    assert defaults["state"] == "dropped" and defaults["n"] == 10
    assert defaults["reason"].startswith("trails multihop at its defaults by ")
    assert result.program_name == "basic" and result.knobs["k"] == 3
    (winner,) = arm_rows(result, "basic", 3)
    assert winner["reason"] == "chosen" and winner["n"] == 24 and winner["score"] == 1.0
    assert result.choice["winner_arm"] == "basic k=3"


def test_an_arm_that_trails_at_drop_p_gets_no_more_calls(scripted_lm, bm25, tmp_path):
    # basic is wrong with a single passage (k 1) and right otherwise; multihop is wrong.
    # k 1 trails the leader on its first rung at p < 0.05: it is scored on those 10
    # questions and no more (the old race's joint compile scored it on the whole fold).
    asked = {"k1": 0}

    def respond(prompt):
        if is_multihop(prompt):
            return {"reasoning": "so", "query": "capital France", "answer": "Berlin"}
        if passages(prompt) == 1:
            asked["k1"] += 1
            return {"answer": "Berlin"}
        return {"answer": "Paris"}

    lm, _ = scripted_lm(respond)
    work = tmp_path / "race"
    result = race(lm, bm25, train(tmp_path), workdir=work)
    (k1,) = arm_rows(result, "basic", 1)
    assert k1["state"] == "dropped" and "p = 0.00195" in k1["reason"]
    assert k1["n"] == 10 and k1["calls"] == 10 and asked["k1"] == 10
    (saved,) = [  # its run directory
        d
        for d in work.glob("basic-*")
        if json.loads((d / "run.json").read_text())["knobs"]["k"] == 1
    ]
    assert len((saved / "predictions.jsonl").read_text().splitlines()) == 10
    # every multihop arm trails too: each stopped at its first rung (3 calls a question)
    multihop = [r for r in result.table if r["program"] == "multihop"]
    assert multihop and all(r["n"] == 10 and r["calls"] == 30 for r in multihop)
    assert all(r["state"] == "dropped" for r in multihop)
    # the calls went to the arms in contention: the winner is scored on the whole fold
    (winner,) = [r for r in result.table if r["reason"] == "chosen"]
    assert winner["program"] == "basic" and winner["n"] == 24


def test_a_killed_race_resumes_without_rescoring(scripted_lm, bm25, tmp_path):
    def respond(prompt):  # basic right with at most three passages, multihop right on most
        if is_multihop(prompt):
            answer = "Berlin" if number(prompt) % 3 == 0 else "Paris"
            return {"reasoning": "so", "query": "capital France", "answer": answer}
        return {"answer": "Paris" if passages(prompt) <= 3 else "Berlin"}

    examples = train(tmp_path)
    lm, engine = scripted_lm(respond)
    whole = race(lm, bm25, examples, workdir=tmp_path / "whole")
    total = len(engine.prompts)
    assert {r["stage"] for r in whole.table} >= {"wave 0", "wave 1", "wave 2"}

    count = {"n": 0}

    def dies(prompt):  # killed in the middle of the race, within a later wave
        count["n"] += 1
        if count["n"] > total // 2:
            raise KeyboardInterrupt
        return respond(prompt)

    lm, _ = scripted_lm(dies)
    with pytest.raises(KeyboardInterrupt):
        race(lm, bm25, examples, workdir=tmp_path / "cut")
    log = (tmp_path / "cut" / "chunks.jsonl").read_text().splitlines()
    assert any(json.loads(line)["wave"] == 1 for line in log)  # it was killed in wave 1
    saved = sum(  # the calls of the questions the killed run saved
        json.loads(line)["scores"]["lm_calls"]
        for d in (tmp_path / "cut").glob("*-*-*")
        if (d / "predictions.jsonl").exists()  # an arm killed on its first question has none
        for line in (d / "predictions.jsonl").read_text().splitlines()
    )
    lm, engine = scripted_lm(respond)
    resumed = race(lm, bm25, examples, workdir=tmp_path / "cut")
    # nothing saved was asked again: the rerun made exactly the calls the first run had not
    assert len(engine.prompts) == total - saved
    assert saved > 0 and len(engine.prompts) < total

    def timeless(table):
        return [{k: v for k, v in row.items() if k != "seconds"} for row in table]

    assert timeless(resumed.table) == timeless(whole.table)
    assert resumed.spent == whole.spent and resumed.choice == whole.choice


@pytest.mark.parametrize("budget", [20, 45, 77, 100, 150, 260])
def test_the_budget_is_never_exceeded_by_more_than_one_chunk(scripted_lm, bm25, tmp_path, budget):
    def respond(prompt):  # every arm right: no test drops anything, halving decides
        if is_multihop(prompt):
            return {"reasoning": "so", "query": "capital France", "answer": "Paris"}
        return {"answer": "Paris"}

    lm, engine = scripted_lm(respond)
    result = race(lm, bm25, train(tmp_path), budget=budget)
    chunk = CHUNK * 3  # a chunk of multihop's questions, the dearer strategy
    assert len(engine.prompts) <= budget + chunk
    assert result.spent == len(engine.prompts)  # every call counted (no cache here)
    assert sum(r["calls"] for r in result.table) == result.spent  # and charged to its arm
    # every arm entered is in the table with the questions it was scored on
    assert all(r["stage"].startswith("wave") and r["n"] >= 0 for r in result.table)
    if budget >= 100:  # past the first wave: grid points other than the defaults entered
        assert {r["knobs"]["k"] for r in result.table if r["program"] == "basic"} != {5}


def test_a_race_on_a_warm_cache_makes_the_same_choices_within_the_same_budget(
    scripted_lm, bm25, tmp_path
):
    # every call counts, answered from DSPy's cache or not: a second race over the same cache
    # (no saved rows) calls no model, and still stops where the first did instead of taking
    # every arm of every grid for free
    def respond(prompt):
        if is_multihop(prompt):
            return {"reasoning": "so", "query": "capital France", "answer": "Paris"}
        return {"answer": "Paris" if passages(prompt) <= 3 else "Berlin"}

    examples = train(tmp_path)
    lm, engine = scripted_lm(respond, cache=True)
    cold = race(lm, bm25, examples, workdir=tmp_path / "cold", budget=120)
    calls = len(engine.prompts)
    lm, engine = scripted_lm(respond, cache=True)
    warm = race(lm, bm25, examples, workdir=tmp_path / "warm", budget=120)
    assert engine.prompts == []  # every answer came from the cache
    assert 0 < calls <= 120 + CHUNK * 3 and warm.spent == cold.spent >= calls

    def arms(result):
        return [(r["program"], r["knobs"], r["n"], r["state"]) for r in result.table]

    assert arms(warm) == arms(cold) and warm.choice == cold.choice


def arm(name, right, tokens, n=10, order=0):
    rows = [
        {"id": f"q{i}", "scores": {"f1": float(i < right), "tokens_in": tokens}} for i in range(n)
    ]
    return Arm(name, order, {"demos": "none"}, {}, rows=rows)


def test_a_rung_keeps_the_better_third_and_the_cheapest_tie():
    field = [arm("a", 9, 900), arm("b", 8, 800), arm("c", 7, 700), arm("d", 6, 100),
             arm("e", 1, 50), arm("f", 5, 500)]  # fmt: skip
    halve(field, 10, "f1", 3, 0.1, last=False)
    # a and b (the better third); d, the cheapest not told apart from a (e, cheaper still,
    # is: 1 of 10 against 9 of 10)
    assert [a.strategy for a in field if a.state == "running"] == ["a", "b", "d"]
    assert field[2].state == "halved" and "better 1/3 on 10" in field[2].reason


def basic_arm(k, right, n, tokens=500, order=0):
    """A basic arm at ``k``, right on its first ``right`` of ``n`` questions."""
    a = arm("basic", right, tokens, n, order)
    a.knobs = {"k": k}
    return a


def test_a_cheaper_arm_ties_the_best_only_within_the_margin():
    # on 20 questions, 3 apart is no difference to the test (p = 0.25), but 0.15 F1 is more
    # than the margin: the best arm wins; 1 apart (0.05) is within it: the cheaper arm wins
    for right, winner in ((13, "basic k=7"), (15, "basic k=1")):
        field = [basic_arm(7, 16, 20, tokens=900), basic_arm(1, right, 20, tokens=300, order=1)]
        for a in field:
            a.choice = halving.choice_of(a, "f1")
        chosen, choice = halving.pick_winner(field, 0.1, 0.05, 20, margin=0.05)
        assert chosen.name == winner and choice["versus_top"]["p"] >= 0.1
        assert choice["margin"] == 0.05


def test_an_arm_a_rung_behind_is_judged_with_the_furthest_on_the_questions_both_scored():
    # the budget ended the race: the defaults (an earlier wave's arm) reached 40 questions,
    # k 3 entered a wave later and reached 20, leading there by far; k 7, two waves later,
    # is on 10 only. k 3 and the defaults are judged on their first 20 questions, k 3 wins
    defaults, later, latest = (
        basic_arm(5, 5, 40),
        basic_arm(3, 18, 20, 600, 1),
        basic_arm(7, 10, 10, 700, 2),
    )
    race = SimpleNamespace(
        arms=[defaults, later, latest],
        first=10,
        valset=[None] * 60,
        tele=SimpleNamespace(metric="f1"),
    )
    finalists = race_mod._Race.finalists(race)
    assert finalists == [defaults, later] and latest.state == "out of budget"
    assert len(defaults.choice["scores"]) == 20 and defaults.choice["score"] == 0.25
    winner, choice = halving.pick_winner(finalists, 0.1, 0.05, 60)
    assert winner is later and choice["versus_top"]["n"] == 20


def test_an_arm_judged_at_its_own_rung_is_ranked_but_stays():
    older = arm("old", 1, 500)  # kept by an earlier wave, on as many questions as the newcomers
    field = [arm("a", 9, 500), arm("b", 8, 500), older]
    halve(field, 10, "f1", 3, 0.1, last=False, stay=[older])
    assert older.state == "running" and field[1].state == "halved"


def test_the_first_rung_of_a_dear_strategy_is_held_to_its_share_of_the_budget():
    # the MuSiQue profile's worst calls a question after each strategy's first question
    worst = {"basic": 1, "multihop": 3, "combined": 5, "ircot": 9, "iterkey": 14}
    calls = CallBudget(500, most=dict(worst))
    by_strategy = {n: Lane(n, [], {}) for n in [*worst, "a", "b", "c", "d"]}  # nine strategies
    for n in "abcd":
        calls.most[n] = 1
    first_rungs(by_strategy, calls, 10, 500, 3, 0.05)  # a share of 500 / (3 x 9): 18 calls
    assert {n: by_strategy[n].first for n in worst} == {
        "basic": 10,
        "multihop": 6,
        "combined": 6,
        "ircot": 6,
        "iterkey": 6,
    }
    first_rungs(by_strategy, calls, 10, None, 3, 0.05)  # no budget: every one on the first rung
    assert {lane.first for lane in by_strategy.values()} == {10}
    assert fewest(0.05) == 6 and fewest(0.01) == 8  # 2 / 2**6 < 0.05 <= 2 / 2**5
    assert ladder(10, 31) == [10, 20, 31] and ladder(10, 60) == [10, 20, 40, 60]


def test_below_the_last_rung_an_arm_kept_by_an_earlier_wave_stays():
    elite = arm("old", 6, 500, n=24)  # scored on the whole fold in an earlier wave
    field = [arm("a", 9, 500), arm("b", 8, 500), elite]
    halve(field, 10, "f1", 3, 0.1, last=False)
    assert elite.state == "running" and field[1].state == "halved"
    halve(field, 10, "f1", 3, 0.1, last=True)  # at the last rung it is ranked and halved
    assert elite.state == "halved"


# --- the measured MuSiQue cost profile (0.5B): calls a question of each strategy at its
# defaults. Nine scripted strategies make those calls (a fraction: one more call on that share
# of the questions), each with a grid of three points (its knob ``variant`` 0, 1, 2; 0 the
# defaults, 1 the next), and are right on a share of the questions set per (strategy, variant).

PROFILE = {
    "basic": 1.0, "one_shot": 1.0, "multihop": 3.0, "combined": 4.1, "iterative": 4.1,
    "knowledge": 5.0, "search_r1": 5.7, "ircot": 9.0, "iterkey": 13.5,
}  # fmt: skip


class Step(dspy.Signature):
    """Answer the question."""

    arm: str = dspy.InputField()
    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


def costed(name: str, calls: float) -> type:
    """A strategy named ``cost-NAME`` making ``calls`` calls a question (on average)."""

    class Costed(NetcastProgram):
        class Knobs(knobs_mod.Knobs):
            variant: int = knobs_mod.knob(0, search=knobs_mod.IntRange(0, 2))

        def __init__(self, retriever=None, *, lm=None, **knob_values):
            super().__init__(retriever, lm=lm, **knob_values)
            self.step = dspy.Predict(Step)

        def forward(self, question: str) -> dspy.Prediction:
            q = int(re.match(r"Question (\d+):", question).group(1))
            extra = (q * 7) % 10 < round((calls % 1) * 10)  # one more call on that share
            arm = f"{self.name} {self.knobs.variant}"
            for _ in range(int(calls) + extra):
                answer = self.step(arm=arm, question=question).answer
            return dspy.Prediction(answer=answer, evidence=[], context=[])

    Costed.name = f"cost-{name}"
    return Costed


@pytest.fixture
def profiled(monkeypatch):
    """The nine strategies registered (for this test only); their names."""
    for name, calls in PROFILE.items():
        cls = costed(name, calls)
        monkeypatch.setitem(PROGRAMS, cls.name, cls)
    return [f"cost-{name}" for name in PROFILE]


def accuracy_script(accuracy):
    """Replies right ("Paris") on ``accuracy[(strategy, variant)]`` of the questions (spread
    over them, a different spread per strategy), wrong otherwise."""

    def respond(prompt):
        arm = re.findall(r"\[\[ ## arm ## \]\]\n(.*?)\n", prompt)[-1]
        name, variant = arm.split()
        salt = sum(map(ord, name))
        right = (number(prompt) * 37 + salt) % 100 < 100 * accuracy(name[5:], int(variant))
        return {"answer": "Paris" if right else "Berlin"}

    return respond


def fold(tmp_path, n):
    """``n`` training questions numbered 0 to n - 1, in that order (every one validating)."""
    (example, *_) = train(tmp_path, 8)
    question = "Question {}: what is the capital of France?"
    return [example.copy(id=f"q{i}", question=question.format(i)) for i in range(n)]


def profile_race(lm, names, examples, budget, report=None, workdir=None):
    settings = RaceSettings(demos=NONE, first=10, budget=budget)
    tele = StrategyRace(settings, lm=lm, report=report, workdir=workdir)
    with dspy.context(lm=lm):
        tele.compile(candidates(names, None, {}, lm), trainset=examples)
    return tele.result


def test_costed_strategies_make_the_measured_calls_a_question(scripted_lm, profiled, tmp_path):
    # what the tests below rely on: over 10 questions, the profile's calls a question
    lm, engine = scripted_lm(accuracy_script(lambda name, variant: 1.0))
    examples = fold(tmp_path, 10)
    for name in profiled:
        program = get_program(name)(None, lm=lm)
        before = len(engine.prompts)
        with dspy.context(lm=lm):
            for example in examples[:10]:
                assert program(question=example.question).answer == "Paris"
        assert (len(engine.prompts) - before) / 10 == PROFILE[name[5:]]


def test_on_the_musique_profile_every_contender_after_the_first_halving_enters_its_next_arm(
    scripted_lm, profiled, tmp_path
):
    # 500 calls over nine strategies on 31 validation questions, first rung 10: at their
    # defaults on 10 questions alone they would cost 465 calls. The dear ones lead at their
    # defaults (iterkey, then ircot and multihop); basic, the cheapest, is in contention as the
    # cheapest tie. The old allocation took the first wave's survivors to 20 questions before
    # any other arm entered, and its budget ended there: no second grid point entered.
    leading = {"iterkey": 0.7, "ircot": 0.5, "multihop": 0.5, "basic": 0.4}
    lm, engine = scripted_lm(accuracy_script(lambda name, variant: leading.get(name, 0.2)))
    after_first_halving = {}  # strategy in contention -> the questions its defaults were scored on

    def report(event, state):
        if event == "rung" and not after_first_halving:
            running = [a for a in state["arms"] if a.state == "running"]
            after_first_halving.update({a.strategy: len(a.rows) for a in running})

    result = profile_race(lm, profiled, fold(tmp_path, 31), 500, report)
    contenders = after_first_halving
    assert "cost-iterkey" in contenders and "cost-basic" in contenders  # dearest, cheapest
    assert len(engine.prompts) <= 500 + CHUNK * 14  # the budget, at most a chunk of iterkey's
    assert result.spent == len(engine.prompts) == sum(r["calls"] for r in result.table)
    for name, first in contenders.items():
        # its second grid point (variant 1) entered in the next wave, and was scored on as
        # many questions as its defaults were on the first rung (6 to 10: the dear ones'
        # first rung is held to their share of the budget)
        (second,) = [r for r in result.table if r["program"] == name and r["knobs"]["variant"] == 1]
        assert second["stage"] == "wave 1" and second["n"] >= first >= 6


def test_on_the_wide_profile_a_strategy_whose_defaults_trail_but_second_point_leads_wins(
    scripted_lm, profiled, tmp_path
):
    # the wide fold (60 validation questions), 1,200 calls: basic is poor at its defaults but
    # right on every question at its second grid point; the dear strategies lead at theirs
    def accuracy(name, variant):
        if name == "basic":
            return 1.0 if variant == 1 else 0.2
        return {"iterkey": 0.6, "ircot": 0.55, "multihop": 0.5}.get(name, 0.3)

    lm, engine = scripted_lm(accuracy_script(accuracy))
    result = profile_race(lm, profiled, fold(tmp_path, 60), 1200)
    assert len(engine.prompts) <= 1200 + CHUNK * 14
    (defaults,) = [
        r for r in result.table if r["program"] == "cost-basic" and r["stage"] == "wave 0"
    ]
    assert defaults["state"] in ("dropped", "halved")
    assert result.program_name == "cost-basic" and result.knobs == {"variant": 1}
    (winner,) = [r for r in result.table if r["reason"] == "chosen"]
    assert winner["score"] == 1.0 and winner["n"] >= 20


def test_a_killed_race_on_the_musique_profile_resumes_with_the_same_first_rungs(
    scripted_lm, profiled, tmp_path
):
    # the first rungs are set from each strategy's first question: a rerun takes those rows
    # (and the rest), makes exactly the calls the killed run had not, and the same choices
    leading = {"iterkey": 0.7, "ircot": 0.5, "multihop": 0.5, "basic": 0.4}
    respond = accuracy_script(lambda name, variant: leading.get(name, 0.2))
    examples = fold(tmp_path, 31)
    lm, engine = scripted_lm(respond)
    whole = profile_race(lm, profiled, examples, 500, workdir=tmp_path / "whole")
    total = len(engine.prompts)
    count = {"n": 0}

    def dies(prompt):  # killed within wave 1, after the first halving
        count["n"] += 1
        if count["n"] > 350:
            raise KeyboardInterrupt
        return respond(prompt)

    lm, _ = scripted_lm(dies)
    with pytest.raises(KeyboardInterrupt):
        profile_race(lm, profiled, examples, 500, workdir=tmp_path / "cut")
    log = (tmp_path / "cut" / "chunks.jsonl").read_text().splitlines()
    assert any(json.loads(line)["wave"] == 1 for line in log)  # it was killed in wave 1
    saved = sum(  # the calls of the questions the killed run saved
        json.loads(line)["scores"]["lm_calls"]
        for d in (tmp_path / "cut").glob("cost-*")
        if (d / "predictions.jsonl").exists()
        for line in (d / "predictions.jsonl").read_text().splitlines()
    )
    lm, engine = scripted_lm(respond)
    resumed = profile_race(lm, profiled, examples, 500, workdir=tmp_path / "cut")
    assert 300 < saved <= 350 and len(engine.prompts) == total - saved

    def timeless(table):
        return [{k: v for k, v in row.items() if k != "seconds"} for row in table]

    assert timeless(resumed.table) == timeless(whole.table)
    assert resumed.spent == whole.spent and resumed.choice == whole.choice
