"""The Typer command-line interface: thin (parse, build adapters, call, render)."""
