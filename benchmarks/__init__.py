"""Benchmarks: the engine against LangGraph 1.2 on the same graphs, in one run, as ratios.

Run with ``bash benchmarks/run.sh`` (see ``benchmarks/README.md``); never part of the tests.
"""

from __future__ import annotations
