"""Graph Studio's durable graph runtime, semantically compatible with LangGraph 1.x.

Public names live in submodules that mirror LangGraph's (``engine.graph``,
``engine.types``, ``engine.checkpoint.memory``...), so porting a LangGraph
program is a change of import prefix. This package never imports Django.
"""

from __future__ import annotations

__version__ = "0.1.0"
