"""Services: the only studio code that calls the engine. Views and consumers delegate here."""

from __future__ import annotations
