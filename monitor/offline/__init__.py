"""Offline drivers behind the audit and planning commands: files in, frozen results out."""
