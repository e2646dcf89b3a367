"""Adapters at the edges: the calibration store (SQLite), and (in later waves) executors and databases."""
