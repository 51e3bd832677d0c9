"""How an annotator's predictions are made: in this process (HF), by vLLM, or by a served model (OpenAI API)."""
