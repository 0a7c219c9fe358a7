"""What the results mean: sources (runs and references), comparisons, fastest, sanity flags, summaries, models."""
