"""Experiments and front ends: measurements that run a model and feed it to the metrics.

The layer above the model (:mod:`standarderror.llm`) and the metrics over arrays
(:mod:`standarderror.uncertainty`, :mod:`standarderror.spectral`): :mod:`.measure` (the
three measurements on any model of the interface), :mod:`.multiple_choice` (the six-option
next-word task over the checkpoint family) and :mod:`.trajectory` (calibration along a
training run). See ARCHITECTURE.md, "Layers".
"""
