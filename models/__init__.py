"""Model and tokenizer builders, annotator heads and attention backends."""
