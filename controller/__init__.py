"""Stateful JobSet controller."""
