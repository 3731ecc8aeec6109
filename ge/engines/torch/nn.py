"""Normalization, softmax and other NN ops on torch: see the engine's docstring."""
