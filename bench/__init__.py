"""Benchmarks that print ratios against a named peer measured in the same run."""
