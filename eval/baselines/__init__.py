"""Annotators that are not a trained checkpoint: grounding features and their export, NLI, RAG, FaithBench's."""
