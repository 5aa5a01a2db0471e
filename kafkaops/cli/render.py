"""Outcomes of a procedure command that are not a plan, rendered in the format the operator asked for.

With ``-o json`` every outcome of a command is a JSON document on stdout, so a tool that drives kafkaops
never has to tell a plan from a line of prose: "nothing to do" too (``{"nothing_to_do": true, "reason":
...}``, exit 0). In the other formats it is the one line on stderr it always was.
"""

from __future__ import annotations

from kafkaops.cli.common import Output, PlanOutput, err_console, print_json


def nothing_to_do(reason: str, output: Output | PlanOutput) -> None:
    """Say that a selection left nothing to do (e.g. every host already serves the revision)."""
    if output in (Output.json, PlanOutput.json):
        print_json({"nothing_to_do": True, "reason": reason})
    else:
        err_console.print(reason, highlight=False, markup=False, soft_wrap=True)
