"""Helpers of scripts/report.py: memory formulas, plots, findings."""
