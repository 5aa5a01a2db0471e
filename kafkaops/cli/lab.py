"""``kafkaops lab``: the local lab of real processes, for rehearsing runbooks and for the tests."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.table import Table

from kafkaops.cli.common import Output, console, err_console, print_json
from kafkaops.errors import LabError

app = typer.Typer(
    help=(
        "The local lab: ZooKeeper, three Kafka 3.9 brokers, etcd + conftool, one sshd per host, an "
        "eventbus HTTP service per host behind a pybal-like load balancer. All on 127.0.10.0/24."
    ),
    no_args_is_help=True,
)
host_app = typer.Typer(help="Power a lab host: reboot (clean), crash (SIGKILL everything), boot.",
                       no_args_is_help=True)
app.add_typer(host_app, name="host")

InventoryOpt = typer.Option(None, "--inventory", "-i", help="Lab inventory (default: inventory/lab.yaml).")
OutputOpt = typer.Option(Output.table, "--output", "-o", help="table or json.")


def _progress(msg: str) -> None:
    err_console.print(f"[dim]…[/] {msg}", highlight=False)


@app.command()
def up(inventory: Path | None = InventoryOpt) -> None:
    """Start the lab from scratch (about 30-60 s with jars cached). Refuses if it is already up."""
    from kafkaops.inventory import load_inventory
    from kafkaops.lab import lab

    seconds = lab.up(load_inventory(inventory), progress=_progress)
    console.print(f"[green]lab up[/] in {seconds:.1f}s — `kafkaops lab status` to inspect, "
                  "`kafkaops lab down` to stop")


@app.command()
def down() -> None:
    """Stop every lab process by pid (idempotent). Data is wiped at the next `up`."""
    from kafkaops.lab import lab

    n = lab.down(progress=_progress)
    console.print(f"lab down ({n} processes stopped)")


@app.command()
def status(output: Output = OutputOpt) -> None:
    """Every lab component and its health. Exit 0 when all are healthy, 12 otherwise."""
    from kafkaops.lab import lab

    components = lab.status()
    healthy = all(c.healthy for c in components)
    if output == Output.json:
        print_json({"healthy": healthy, "components": [c.to_dict() for c in components]})
    else:
        table = Table(title="kafkaops lab")
        for col in ("component", "address", "pid", "health", "detail"):
            table.add_column(col)
        for c in components:
            table.add_row(c.name, c.address, str(c.pid or "-"),
                          "[green]ok[/]" if c.healthy else "[red]down[/]", c.detail)
        console.print(table)
    if not healthy:
        raise typer.Exit(LabError.exit_code)



@host_app.command("reboot")
def host_reboot(host: str = typer.Argument(..., help="Lab host, short name or FQDN."),
                wait: bool = typer.Option(True, help="Wait until the host is back.")) -> None:
    """Clean reboot: every process of HOST stops (sshd too), the boot id changes, the host boots."""
    from kafkaops.lab.host import LabHost

    h = LabHost.named(host)
    before = h.boot_id()
    if wait:
        h.reboot()
        console.print(f"{h.host.name} rebooted: boot id {before[:8]}… → {h.boot_id()[:8]}…")
    else:
        h.spawn_detached("reboot")
        console.print(f"{h.host.name} rebooting")


@host_app.command("crash")
def host_crash(host: str = typer.Argument(..., help="Lab host, short name or FQDN.")) -> None:
    """Power loss: SIGKILL every process of HOST. It stays down until `kafkaops lab host boot HOST`."""
    from kafkaops.lab.host import LabHost

    h = LabHost.named(host)
    h.power_off(clean=False)
    console.print(f"{h.host.name} crashed (all processes killed)")


@host_app.command("boot")
def host_boot(host: str = typer.Argument(..., help="Lab host, short name or FQDN.")) -> None:
    """Power on a crashed host: new boot id, sshd, then kafka and eventbus."""
    from kafkaops.lab.host import LabHost

    h = LabHost.named(host)
    t = time.monotonic()
    h.power_on()
    console.print(f"{h.host.name} booted in {time.monotonic() - t:.1f}s")
