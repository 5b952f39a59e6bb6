"""What the CPU computes natively (netcast.machine): a torch build without oneDNN's check, or
one whose check fails, reads as no native bfloat16 (float32 everywhere it matters)."""

import types

import pytest
import torch

from netcast import machine


@pytest.fixture(autouse=True)
def fresh():
    machine.native_bf16.cache_clear()
    yield
    machine.native_bf16.cache_clear()


def test_onednns_check_decides(monkeypatch):
    namespace = types.SimpleNamespace(_is_mkldnn_bf16_supported=lambda: True)
    monkeypatch.setattr(torch.ops, "mkldnn", namespace)
    assert machine.native_bf16() is True


def failing():
    raise RuntimeError("no oneDNN")


@pytest.mark.parametrize(
    "namespace", [types.SimpleNamespace(), types.SimpleNamespace(_is_mkldnn_bf16_supported=failing)]
)
def test_no_check_or_a_failing_one_is_no_native_bf16(monkeypatch, namespace):
    monkeypatch.setattr(torch.ops, "mkldnn", namespace)
    assert machine.native_bf16() is False
