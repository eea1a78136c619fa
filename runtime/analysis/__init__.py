"""Analyses of a replay's block stream: one-pass miss-ratio curves (mrc.py) and the miss breakdown (miss_classes.py)."""
