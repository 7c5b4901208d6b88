"""Private helpers shared by the engine's modules; not part of the public API."""
