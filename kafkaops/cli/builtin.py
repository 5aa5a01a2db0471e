"""The built-in commands and the module that registers each (the procedure commands are generated).

A table of its own so that both the entry point (:mod:`kafkaops.cli.main`, which imports only the module
of the command being run) and ``kafkaops runbooks list --check`` (which refuses a runbook whose generated
command a built-in would hide) read it without importing each other.
"""

# The module that registers each built-in command. Typer builds every command's click parameters on
# each start (~1 ms a command, plus the module's imports); `kafkaops status`, which operators and
# scripts run between every step, should pay only for its own. tests/unit/test_cli_dispatch.py
# fails when a command is missing here. The procedure commands are generated from runbooks; command groups
# of other packages (the lab's `kafkaops lab`) register through the entry-point group below.
COMMAND_MODULES = {
    "status": "status",
    "resume": "runs", "apply": "runs", "runs": "runs",
    "check": "check", "snapshot": "check",
    "run": "runbook_commands",
    "runbooks": "runbooks",
    "service": "service",
    "failed-events": "failed_events",
    "placement": "placement",
    "switchover": "switchover", "offsets": "switchover",
    "migrate-to-kraft": "migration",
    "rolling-upgrade": "upgrade",
    "doctor": "doctor",
    "docs": "docs",
    "inventory": "inventory",
    "broker": "broker",
    "controllers": "controllers",
}

#: The entry-point group through which other packages add command groups (``[project.entry-points.
#: "kafkaops.commands"] NAME = "module:typer_app"``): the lab registers ``kafkaops lab`` this way, so the
#: product's CLI never imports the lab.
ENTRY_POINT_GROUP = "kafkaops.commands"
