"""The signed-in user's own account pages: personal API tokens (``/account/tokens/``)."""
