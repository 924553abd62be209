"""The embedded runner: one process with HTTP ingest (server), its service (host + SQLite store,
snapshots), the web board and the terminal view."""
