"""Subcommands of the llm-monitor CLI, one module each, registered in monitor.cli."""
