import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import TrialState, create_trial

from netcast.errors import InputError
from netcast.optimize import study as tuning

TESTS = str(Path(__file__).resolve().parents[1])

WORKER = """
import sys, time, dspy
from helpers import DOCS, ScriptedEngine, WordCounter, last_question
from netcast.corpus import Corpus
from netcast.optimize import study as tuning
from netcast.retrievers.bm25 import BM25Retriever

def slow_answer(prompt):
    time.sleep(float(sys.argv[3]))
    return {"reasoning": "It says so.", "answer": "Paris"}

engine = ScriptedEngine(slow_answer)
dspy.configure(lm=dspy.LM("scripted/fake", engine=engine, cache=False, num_retries=0))
retriever = BM25Retriever(Corpus.from_documents(DOCS, WordCounter()))
dev = [dspy.Example(id=f"q{i}", question=f"capital {i} of France?", answers=["Paris"],
                    gold_ids=["paris"]).with_inputs("question") for i in range(4)]
study = tuning.open_study("kill-test", sys.argv[1], ["f1", "calls"], heartbeat=1)
tuning.tune(study, int(sys.argv[2]), progress=False, program_name="basic",
            retriever=retriever, trainset=[], devset=dev, objectives=["f1", "calls"])
"""


def test_three_trials_on_sqlite(scripted_lm, bm25, tmp_path):
    import dspy

    scripted_lm(lambda prompt: {"reasoning": "It says so.", "answer": "Paris"})
    dev = [
        dspy.Example(
            id=f"q{i}", question="capital of France?", answers=["Paris"], gold_ids=["paris"]
        ).with_inputs("question")
        for i in range(3)
    ]
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = tuning.open_study("s", storage, ["f1", "cost"])
    tuning.tune(
        study,
        3,
        progress=False,
        program_name="basic",
        retriever=bm25,
        trainset=[],
        devset=dev,
        objectives=["f1", "cost"],
    )
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(done) == 3
    for t in done:
        assert set(t.user_attrs["knobs"]) == {"k", "chain_of_thought", "links"}
        assert t.values[0] == 1.0 and t.values[1] == pytest.approx(
            t.user_attrs["aggregate"]["tokens_in"] + t.user_attrs["aggregate"]["tokens_out"]
        )
    again = tuning.open_study("s", storage, ["f1", "cost"])  # resumes, runs nothing more
    tuning.tune(
        again,
        3,
        progress=False,
        program_name="basic",
        retriever=bm25,
        trainset=[],
        devset=dev,
        objectives=["f1", "cost"],
    )
    assert len(again.trials) == 3


def count(storage, states):
    study = optuna.load_study(study_name="kill-test", storage=storage)
    return len(study.get_trials(deepcopy=False, states=states))


def test_a_killed_study_resumes_without_losing_or_repeating_trials(tmp_path):
    storage = f"sqlite:///{tmp_path / 'kill.db'}"
    env = {**os.environ, "PYTHONPATH": TESTS}
    args = [sys.executable, "-c", textwrap.dedent(WORKER), storage, "5", "0.3"]
    worker = subprocess.Popen(
        args, cwd=tmp_path, env=env, start_new_session=True, stderr=subprocess.PIPE
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(0.2)
        try:
            if (
                count(storage, (TrialState.COMPLETE,)) >= 2
                and count(storage, (TrialState.RUNNING,)) == 1
            ):
                break
        except Exception:  # the study is not created yet
            continue
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()
    study = optuna.load_study(study_name="kill-test", storage=storage)
    finished_before = {t.number for t in study.trials if t.state == TrialState.COMPLETE}
    killed = [t for t in study.trials if t.state == TrialState.RUNNING]
    assert len(finished_before) >= 2 and len(killed) == 1
    time.sleep(2.5)  # let the killed trial's heartbeat go stale

    subprocess.run(args, cwd=tmp_path, env=env, check=True, capture_output=True)
    study = optuna.load_study(study_name="kill-test", storage=storage)
    complete = [t for t in study.trials if t.state == TrialState.COMPLETE]
    assert len(complete) == 5  # nothing lost: the study holds the 5 trials asked for
    failed = [t for t in study.trials if t.state == TrialState.FAIL]
    assert [t.number for t in failed] == [killed[0].number]
    retried = [
        t
        for t in complete
        if optuna.storages.RetryHeartbeatStaleTrialCallback.retried_trial_number(t)
        == killed[0].number
    ]
    assert len(retried) == 1 and retried[0].params == killed[0].params
    # nothing repeated: trials finished before the kill were not run again
    assert {t.number for t in complete} >= finished_before
    assert len(study.trials) == 6


def frozen(number, f1, cost):
    return create_trial(
        values=[f1, cost],
        params={"k": number + 1},
        distributions={"k": IntDistribution(1, 20)},
        user_attrs={"knobs": {"k": number + 1}},
    )


def crafted_study():
    study = optuna.create_study(directions=["maximize", "minimize"])
    points = [(0.20, 100), (0.50, 200), (0.55, 400), (0.56, 800), (0.40, 300), (0.10, 150)]
    for i, (f1, cost) in enumerate(points):
        study.add_trial(frozen(i, f1, cost))
    return study


def test_pareto_front_knee_and_pick_rules():
    study = crafted_study()
    front = tuning.pareto_front(study.trials)
    assert [(t.values[0], t.values[1]) for t in front] == [
        (0.20, 100),
        (0.50, 200),
        (0.55, 400),
        (0.56, 800),
    ]
    assert tuning.pick(study, "best-quality").values == [0.56, 800]
    assert tuning.pick(study, "knee").values == [0.50, 200]
    assert tuning.pick(study, "max-quality-under-cost=350").values == [0.50, 200]
    with pytest.raises(InputError, match="no completed trial costs <= 50"):
        tuning.pick(study, "max-quality-under-cost=50")
    with pytest.raises(InputError, match="unknown --pick"):
        tuning.pick(study, "fastest")


def test_pick_rules_are_checked_before_any_trial_runs():
    for rule in ("best-quality", "knee", "max-quality-under-cost=1.5"):
        tuning.check_pick_rule(rule)
    for rule in ("fastest", "max-quality-under-cost=cheap", "max-quality-under-cost="):
        with pytest.raises(InputError, match="unknown --pick"):
            tuning.check_pick_rule(rule)
    for rule in ("best-quality", "knee"):  # one objective: both pick the best quality
        tuning.check_pick_rule(rule, ["em"])
    with pytest.raises(InputError, match="limits a cost, but --objectives em measures none"):
        tuning.check_pick_rule("max-quality-under-cost=1.5", ["em"])


def test_objectives_are_checked():
    assert tuning.parse_objectives("f1,cost") == ["f1", "cost"]
    with pytest.raises(InputError):
        tuning.parse_objectives("cost,f1")
    with pytest.raises(InputError):
        tuning.parse_objectives("f1,money")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "storage 'not a url': not a database URL"),
        ("foo://somewhere/db", "storage foo://somewhere/db: unknown database 'foo'"),
        ("mysql://me:secret@127.0.0.1/db", r"mysql://me:\*\*\*@127.0.0.1/db: the database driver"),
        (
            "postgresql+psycopg://me:secret@127.0.0.1:{port}/db",
            r"postgresql\+psycopg://me:\*\*\*@127.0.0.1:{port}/db: cannot connect or read it",
        ),
        ("sqlite:///{tmp}/notes.md", "notes.md: cannot connect or read it .file is not a database"),
        ("sqlite:///{tmp}/no/such/dir/t.db", "cannot connect or read it .unable to open"),
    ],
)
def test_a_storage_that_cannot_be_opened_is_one_line_naming_it_without_its_password(
    tmp_path, url, message
):
    from helpers_server import free_port

    port = free_port()  # nothing listens there
    (tmp_path / "notes.md").write_text("# notes, not a database\n" * 100)
    url = url.format(port=port, tmp=tmp_path)
    with pytest.raises(InputError, match=message.format(port=port)) as err:
        tuning.open_study("s", url, ["f1"])
    assert "secret" not in str(err.value) and "\n" not in str(err.value)
    assert (tmp_path / "notes.md").read_text().startswith("# notes")


def test_a_storage_that_opens_is_accepted(tmp_path):
    tuning.check_storage(f"sqlite:///{tmp_path}/t.db")
    study = tuning.open_study("s", f"sqlite:///{tmp_path}/t.db", ["f1"])
    assert study.study_name == "s"


PG_BINS = sorted(Path("/usr/lib/postgresql").glob("*/bin"))
PG_BIN = PG_BINS[-1] if PG_BINS else Path("/nonexistent")


@pytest.fixture
def postgres():
    """A real PostgreSQL server on loopback, run as the 'postgres' system user (its data
    directory outside pytest's root-only temporary tree)."""
    if not (PG_BIN / "initdb").exists():
        message = "PostgreSQL is not installed: apt-get install postgresql (.ci/run does)"
        if os.environ.get("NETCAST_CI"):
            pytest.fail(message)  # CI installs it, so there the test must run
        pytest.skip(message)
    data = Path(tempfile.mkdtemp(prefix="netcast-pg-"))
    os.chown(data, *_ids("postgres"))
    port = 54000 + os.getpid() % 1000
    run_as = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*run_as, str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *run_as,
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(data / "log"),
            "-o",
            f"-p {port} -k {data} -c listen_addresses=127.0.0.1",
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [*run_as, str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "netcast"],
        check=True,
        capture_output=True,
    )
    yield f"postgresql://postgres@127.0.0.1:{port}/netcast"
    subprocess.run(
        [*run_as, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
        capture_output=True,
    )


def _ids(user):
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid


@pytest.mark.slow
def test_two_tune_workers_share_one_study_on_postgresql(postgres, tmp_path):
    """Two `netcast tune` processes (embedded model, 2 dev questions each trial) on one study."""
    cmd = [
        str(Path(sys.executable).parent / "netcast"),
        "tune",
        "--storage",
        postgres,
        "--study",
        "shared",
        "--trials",
        "4",
        "--objectives",
        "f1",
        "--dev-limit",
        "2",
        "--train-limit",
        "2",
        "--pick",
        "best-quality",
    ]
    env = {**os.environ, "PYTHONPATH": TESTS}
    workers = [
        subprocess.Popen(
            cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(2)
    ]
    outputs = [w.communicate(timeout=900)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], [o[-3000:] for o in outputs]
    study = optuna.load_study(study_name="shared", storage=postgres)
    complete = study.get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))
    assert len(complete) >= 4
    assert len({t.user_attrs["worker"] for t in complete}) == 2  # both workers ran trials

    export = subprocess.run(
        [*cmd, "--out", str(tmp_path / "best")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert export.returncode == 0, export.stdout + export.stderr
    recipe = json.loads((tmp_path / "best" / "recipe.json").read_text())
    assert recipe["tuning"]["study"] == "shared"
    code = f"import netcast; p = netcast.load({str(tmp_path / 'best')!r}); print(p.knobs.k)"
    loaded = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True
    )
    assert loaded.returncode == 0, loaded.stderr[-1500:]
    assert loaded.stdout.strip() == str(recipe["knobs"]["k"])


def test_an_in_memory_study_needs_no_storage(scripted_lm, bm25):
    import dspy

    scripted_lm(lambda prompt: {"reasoning": "r", "answer": "Paris"})
    dev = [
        dspy.Example(
            id="q", question="capital of France?", answers=["Paris"], gold_ids=["paris"]
        ).with_inputs("question")
    ]
    study = tuning.open_study("mem", None, ["f1"])
    tuning.tune(
        study,
        2,
        progress=False,
        program_name="basic",
        retriever=bm25,
        trainset=[],
        devset=dev,
        objectives=["f1"],
    )
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 2


def test_a_grid_study_tries_each_setting_once_and_stops_when_the_grid_is_spent(scripted_lm, bm25):
    import dspy

    scripted_lm(lambda prompt: {"answer": "Paris"})
    dev = [
        dspy.Example(
            id="q", question="capital of France?", answers=["Paris"], gold_ids=["paris"]
        ).with_inputs("question")
    ]
    grid = {"k": [1, 2, 3], "chain_of_thought": [False], "links": [0]}
    study = tuning.open_study("g", None, ["f1", "cost"], grid=grid)
    tuning.tune(
        study,
        8,
        progress=False,
        program_name="basic",
        retriever=bm25,
        trainset=[],
        devset=dev,
        objectives=["f1", "cost"],
    )
    tried = [t.user_attrs["knobs"]["k"] for t in study.trials]
    assert sorted(tried) == [1, 2, 3]  # 8 asked for, the 3 settings each once


def test_judge_is_refused_as_an_objective_since_tuning_runs_no_judge():
    with pytest.raises(InputError, match="metric judge: tuning scores questions without"):
        tuning.parse_objectives("judge,cost")
    assert tuning.parse_objectives("em") == ["em"]
