"""Pure statistics for paired model comparison: no I/O, logging or plotting."""
