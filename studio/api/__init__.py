"""The JSON API under /api/ (Agent Server protocol), token auth."""
