"""Recurrent cells on torch: see the engine's docstring."""
