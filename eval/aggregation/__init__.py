"""A record's row from the rows of its parts: its sentences (sentence-level annotators) or UHGEval's keywords."""
