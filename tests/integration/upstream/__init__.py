"""Ports of upstream JobSet's integration scenarios, one test each (see scenarios.py)."""
