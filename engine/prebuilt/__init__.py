"""Prebuilt graphs and nodes: tool execution and a tool-calling agent."""

from __future__ import annotations
