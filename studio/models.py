"""Studio models (runs, events, decisions) arrive with the issues that need them."""

from __future__ import annotations
