"""Node result caches used by ``CachePolicy``."""

from __future__ import annotations
