"""What a run shows of its scores: report files, plots, W&B, finished runs compared, annotated-file summaries."""
