"""Data made here: the sample novel corpus, its injected hallucinations, length extension, ANAH sample, twins."""
