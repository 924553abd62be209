"""Evaluation harnesses that evaluate until resolved: each posts its results to a running
monitor as they complete and stops spending compute once the monitor's plan says stop
(docs/until-resolved.md). Each module needs its harness (an optional extra) only when used."""
