"""Evaluation harness: parsers, metrics, generation, scoring and reports."""
