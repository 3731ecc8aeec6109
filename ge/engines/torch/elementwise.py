"""Elementwise ops on torch: see the engine's docstring."""
