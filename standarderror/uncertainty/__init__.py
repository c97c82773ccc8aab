"""Calibration, coverage (conformal) and related uncertainty measurements: pure functions over arrays."""
