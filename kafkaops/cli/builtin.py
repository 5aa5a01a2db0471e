"""The built-in commands and the module that registers each (the procedure commands are generated).

A table of its own so that both the entry point (:mod:`kafkaops.cli.main`, which imports only the module
of the command being run) and ``kafkaops runbooks list --check`` (which refuses a runbook whose generated
command a built-in would hide) read it without importing each other.
"""

# The module that registers each built-in command. Typer builds every command's click parameters on
# each start (~1 ms a command, plus the module's imports); `kafkaops status`, which operators and
# scripts run between every step, should pay only for its own. tests/unit/test_cli_dispatch.py
# fails when a command is missing here. The procedure commands are generated from runbooks.
COMMAND_MODULES = {
    "status": "status",
    "resume": "runs", "apply": "runs", "runs": "runs",
    "check": "check", "snapshot": "check",
    "run": "procedures",
    "runbooks": "runbooks",
    "lab": "lab",
    "service": "service",
    "failed-events": "failed_events",
    "placement": "placement",
    "switchover": "switchover", "offsets": "switchover",
}
