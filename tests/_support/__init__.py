"""Helpers shared by test layers. Import them; keep conftest.py bodies thin."""
