"""Long-term memory stores: namespaced JSON documents shared across threads."""

from __future__ import annotations
