"""Checkpoint storage: the saver contract, its serializer and three backends.

Storage never imports the runtime (``engine.pregel``, ``engine.graph``...).
"""

from __future__ import annotations
