"""What a model reads of a record: prompts, collation, evidence and marks, encoder pairs, token labels, targets."""
