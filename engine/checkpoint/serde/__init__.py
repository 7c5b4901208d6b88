"""Serializers: turn values into ``(type_tag, payload)`` pairs and back."""

from __future__ import annotations
