"""The demo graphs the studio ships: purchase approval, research fan-out, tool agent."""

from __future__ import annotations
