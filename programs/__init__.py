"""Strategies: one package per paper's method (``netcast.programs.<strategy>``: its program, its
own Signatures and its private rules), registered by name; parts shared by several strategies
in ``netcast.programs.shared``."""

from netcast.programs.base import NetcastProgram
from netcast.programs.basic import BasicRAG
from netcast.programs.ircot import IRCoT
from netcast.programs.iterative import Combined, Iterative
from netcast.programs.iterkey import IterKey
from netcast.programs.knowledge import KnowledgeAware
from netcast.programs.multihop import MultiHop
from netcast.programs.one_shot import OneShot
from netcast.programs.registry import PROGRAMS, get_program, program_names, register
from netcast.programs.search_r1 import SearchR1

__all__ = [
    "PROGRAMS",
    "BasicRAG",
    "Combined",
    "IRCoT",
    "IterKey",
    "Iterative",
    "KnowledgeAware",
    "MultiHop",
    "NetcastProgram",
    "OneShot",
    "SearchR1",
    "get_program",
    "program_names",
    "register",
]
