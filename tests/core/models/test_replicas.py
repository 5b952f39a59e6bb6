"""Replicas of one model on several servers (netcast.models.replicas), without a server: calls
are balanced, a replica that cannot be reached is left for the others and comes back after its
cooldown, and a request the server refuses is not sent elsewhere. The real two-server test is
in tests/core/test_server.py."""

import threading

import dspy
import pytest
from dspy import lm15

from helpers import ScriptedEngine
from netcast.models.factory import context_window, endpoint, make_lm
from netcast.models.replicas import ReplicaEngine


class Down(ScriptedEngine):
    """A replica whose server is gone (every call: a transport error)."""

    def __init__(self, error=lm15.TransportError):
        super().__init__(lambda prompt: {"answer": "never"})
        self.error = error

    def complete(self, request):
        self.prompts.append("tried")
        raise self.error("connection refused")


def replicas(*engines, cooldown=30.0):
    engine = ReplicaEngine([f"http://10.0.0.{i}:8000/v1" for i in range(len(engines))], cooldown)
    engine._engines = list(engines)
    return engine


def lm_over(engine):
    return dspy.LM("openai/qwen", engine=engine, cache=False, num_retries=0)


def ask(lm, n):
    predict = dspy.Predict("question -> answer")
    with dspy.context(lm=lm):
        return [predict(question=f"q{i}").answer for i in range(n)]


def test_calls_alternate_between_replicas_one_at_a_time():
    a, b = (ScriptedEngine(lambda p, name=name: {"answer": name}) for name in "ab")
    engine = replicas(a, b)
    assert ask(lm_over(engine), 6) == ["a", "b", "a", "b", "a", "b"]
    assert engine.answered == [3, 3] and engine.in_flight == [0, 0]


def test_concurrent_calls_go_to_the_replica_with_fewer_in_flight():
    gate, entered = threading.Event(), threading.Event()

    def slow(prompt):
        entered.set()
        gate.wait(5)
        return {"answer": "slow"}

    a, b = ScriptedEngine(slow), ScriptedEngine(lambda p: {"answer": "b"})
    engine = replicas(a, b)
    lm = lm_over(engine)
    first = threading.Thread(target=ask, args=(lm, 1))
    first.start()
    entered.wait(5)  # replica a is busy with the first call
    assert ask(lm, 2) == ["b", "b"]  # both go to b while a is busy
    gate.set()
    first.join()
    assert engine.answered == [1, 2]


def test_an_unreachable_replica_is_left_for_the_others_then_retried_after_its_cooldown():
    down, up = Down(), ScriptedEngine(lambda p: {"answer": "up"})
    engine = replicas(down, up, cooldown=0.0)
    assert ask(lm_over(engine), 1) == ["up"]  # tried a, failed over to b within the call
    assert engine.failed == [1, 0] and engine.answered == [0, 1]
    engine.cooldown = 60.0
    assert ask(lm_over(engine), 4) == ["up"] * 4
    assert engine.failed == [2, 0] and len(down.prompts) == 2  # then left alone while cooling


@pytest.mark.parametrize("error", [lm15.TimeoutError, lm15.ServerError])
def test_timeouts_and_server_errors_fail_over_too(error):
    engine = replicas(Down(error), ScriptedEngine(lambda p: {"answer": "up"}))
    assert ask(lm_over(engine), 1) == ["up"]


def test_when_every_replica_fails_the_call_fails_with_the_last_error():
    engine = replicas(Down(), Down())
    with pytest.raises(Exception, match="connection refused"):
        ask(lm_over(engine), 1)
    assert engine.failed == [1, 1] and engine.in_flight == [0, 0]


def test_a_request_the_server_refuses_is_not_sent_to_another_replica():
    refusing = Down(lm15.InvalidRequestError)
    other = ScriptedEngine(lambda p: {"answer": "b"})
    engine = replicas(refusing, other)
    with pytest.raises(Exception, match="connection refused"):
        ask(lm_over(engine), 1)
    assert other.prompts == [] and engine.failed == [0, 0]


def test_repeating_the_api_base_makes_a_replicated_lm():
    bases = ["http://a:8000/v1", "http://b:8000/v1"]
    lm = make_lm("openai/qwen", api_base=bases)
    assert isinstance(lm.engine, ReplicaEngine) and lm.engine.bases == bases
    assert endpoint(lm) == "http://a:8000/v1 and http://b:8000/v1"
    assert context_window(lm) == 128_000  # litellm does not know the model: the default
    single = make_lm("openai/qwen", api_base=[bases[0], bases[0]])  # a repeat is one server
    assert single.kwargs["api_base"] == bases[0] and isinstance(single.engine, str)
