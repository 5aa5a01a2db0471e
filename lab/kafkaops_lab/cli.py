"""``kafkaops lab``: the local lab of real processes, for rehearsing runbooks and for the tests.

The lab is a user of the product, on its top floor: the product's CLI does not know it. These commands
register themselves through the entry point ``kafkaops.commands: lab = kafkaops_lab.cli:app``
(``pyproject.toml``), which the CLI loads only when ``lab`` is the command run (or for ``--help``).
Without ``--inventory`` they act on the lab's own inventories (:mod:`kafkaops_lab.inventories`), never on
the operator's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kafkaops.cli.common import TableOrJson, console, err_console, print_json
from kafkaops.errors import LabError

if TYPE_CHECKING:
    from kafkaops.model import Cluster

app = typer.Typer(
    help=(
        "The local lab: ZooKeeper, three Kafka 3.9 brokers, etcd + conftool, one sshd per host, an "
        "eventbus HTTP service per host behind a pybal-like load balancer. All on 127.0.10.0/24. Also the "
        "stretch lab (--brokers 4 --dcs eqiad,codfw, 127.0.20.0/24) and the KRaft lab (--mode kraft: "
        "Kafka 4.x, three controller nodes + three brokers, 127.0.50.0/24), the migration lab (--mode "
        "migration: ZooKeeper mode with three KRaft controller hosts prepared, 127.0.90.0/24) and the two-site "
        "lab (--sites eqiad,codfw: two clusters, MirrorMaker 2, discovery records; 127.0.60.0/24 and "
        "127.0.70.0/24); pick one with --lab."
    ),
    no_args_is_help=True,
)
host_app = typer.Typer(help="Power a lab host (reboot, crash, boot) and set its fault knobs (knob, slow-shutdown).",
                       no_args_is_help=True)
app.add_typer(host_app, name="host")
net_app = typer.Typer(help="Network faults: partition lab components (hosts, ZooKeeper, etcd) and the admin "
                           "(kafkaops run with group 64600) from each other with iptables DROP rules in the "
                           "lab's own chain; heal; show.",
                      no_args_is_help=True)
app.add_typer(net_app, name="net")

InventoryOpt = typer.Option(None, "--inventory", "-i", help="Lab inventory (default: the lab's own lab.yaml).")

#: The labs `lab up` builds from its layout options: (brokers, DCs) -> the inventory describing it.
LAYOUTS = {(3, ("eqiad",)): "lab.yaml", (4, ("eqiad", "codfw")): "lab-stretch.yaml"}
#: ... and from ``--mode``: ZooKeeper mode is the default lab, KRaft mode the KRaft lab.
MODES = {"zookeeper": "lab.yaml", "kraft": "lab-kraft.yaml", "migration": "lab-migration.yaml"}


#: Whether ``--lab`` named a lab: without it, ``down`` and ``status`` act on every lab that is up.
_CHOSEN: list[str] = []


@app.callback()
def _which_lab(lab: str | None = typer.Option(None, "--lab", metavar="CLUSTER",
                                              help="Which lab the command acts on: lab, lab-stretch, lab-kraft "
                                                   "or lab-sites, each in its own directory "
                                                   "(~/.local/state/kafkaops/CLUSTER). Without it, `down` and "
                                                   "`status` act on every lab that is up, the other commands "
                                                   "on the default lab (lab).")) -> None:
    """The lab commands act on one lab: ``--lab`` picks it by its cluster name (before the sub-command:
    ``kafkaops lab --lab lab-stretch down``)."""
    import os

    from kafkaops_lab import dirs

    _CHOSEN[:] = [lab] if lab is not None else []
    if lab is not None and lab != dirs.DEFAULT_LAB:
        os.environ[dirs.lab_dir_env()] = str(dirs.lab_dir(lab))


def _labs() -> list[Path]:
    """The labs ``down``/``status`` act on: the one ``--lab`` chose, else every lab that is up."""
    from kafkaops_lab import dirs, lab

    return [dirs.lab_dir()] if _CHOSEN else lab.running()


def _default_inventory() -> Path:
    """The lab's own ``lab.yaml``, unless the root ``kafkaops -i FILE`` (or ``$KAFKAOPS_INVENTORY``) named
    another lab inventory: the lab never searches the operator's inventory directories."""
    import os

    from kafkaops.places import INVENTORY_ENV, given
    from kafkaops_lab.inventories import lab_inventory

    named = given().inventory or (Path(os.environ[INVENTORY_ENV]) if os.environ.get(INVENTORY_ENV) else None)
    return named if named is not None and named.is_file() else lab_inventory()


def _layout_inventory(brokers: int | None, dcs: str | None) -> Path | None:
    """The inventory of the layout ``--brokers/--dcs`` ask for (``None``: neither given)."""
    if brokers is None and dcs is None:
        return None
    wanted = (brokers or 3, tuple(d.strip() for d in (dcs or "eqiad").split(",") if d.strip()))
    if wanted not in LAYOUTS:
        known = "; ".join(f"--brokers {b} --dcs {','.join(d)}" for b, d in LAYOUTS)
        raise LabError(f"no lab of {wanted[0]} brokers in {', '.join(wanted[1])}", hint=f"labs: {known}")
    from kafkaops_lab.inventories import lab_inventory

    return lab_inventory(LAYOUTS[wanted])
OutputOpt = typer.Option(TableOrJson.table, "--output", "-o", help="table or json.")


def _progress(msg: str) -> None:
    err_console.print(f"[dim]…[/] {msg}", highlight=False)


@app.command()
def up(inventory: Path | None = InventoryOpt,
       brokers: int | None = typer.Option(None, "--brokers", help="Brokers: 3 (the default lab) or 4 (with "
                                          "--dcs eqiad,codfw: the stretch lab, inventory/lab-stretch.yaml)."),
       dcs: str | None = typer.Option(None, "--dcs", help="DCs, comma-separated: eqiad, or eqiad,codfw for the "
                                      "stretch lab (two brokers per DC, broker.rack = DC, follower fetching)."),
       mode: str | None = typer.Option(None, "--mode", metavar="zookeeper|kraft|migration",
                                       help="zookeeper: Kafka 3.9 with ZooKeeper (the default lab); kraft: Kafka "
                                            "4.x, three controller nodes + three brokers, no ZooKeeper "
                                            "(inventory/lab-kraft.yaml); migration: the ZooKeeper lab with three "
                                            "KRaft controller hosts prepared, not running, ready to be migrated "
                                            "(inventory/lab-migration.yaml, 127.0.90.0/24)."),
       sites: str | None = typer.Option(None, "--sites", metavar="DC,DC",
                                        help="eqiad,codfw: the two-site lab (inventory/lab-sites.yaml): main-eqiad "
                                             "and main-codfw, an eventbus per site, MirrorMaker 2 between them, "
                                             "discovery records in conftool (eqiad active)."),
       broker_heap: str | None = typer.Option(None, "--broker-heap", metavar="SIZE",
                                              help="Each broker's JVM heap (-Xmx), default 320m; 1g for a bench "
                                                   "that grows the lab to thousands of partitions "
                                                   "(bench/bench_scale.py)."),
       ) -> None:
    """Start the lab from scratch (about 30-60 s with jars cached). Refuses if it is already up."""
    from kafkaops.inventory import load_inventory
    from kafkaops_lab import lab
    from kafkaops_lab.inventories import lab_inventory

    if sum(x is not None for x in (inventory, mode, sites)) + (brokers is not None or dcs is not None) > 1:
        raise LabError("give one of --inventory, --mode, --sites or --brokers/--dcs")
    if mode is not None and mode not in MODES:
        raise LabError(f"unknown lab mode {mode!r}", hint=f"modes: {', '.join(MODES)}")
    if sites is not None:
        layout: Path | None = lab_inventory("lab-sites.yaml")
    else:
        layout = lab_inventory(MODES[mode]) if mode else _layout_inventory(brokers, dcs)
    cluster = load_inventory(inventory or layout or _default_inventory())
    if cluster.multi_site:
        if broker_heap is not None:
            raise LabError("--broker-heap is for a one-cluster lab", hint="start the two-site lab without it")
        _sites_up(cluster, sites)
        return
    seconds = lab.up(cluster, progress=_progress, broker_heap=broker_heap)
    which = "" if cluster.name == "lab" else f" --lab {cluster.name}"
    console.print(f"[green]lab {cluster.name} up[/] in {seconds:.1f}s — `kafkaops lab{which} status` to inspect, "
                  f"`kafkaops lab{which} down` to stop")


def _sites_up(sites: Cluster, wanted: str | None) -> None:
    from kafkaops_lab import sites as sites_lab

    if wanted is not None and [d.strip() for d in wanted.split(",")] != list(sites.sites):
        raise LabError(f"no two-site lab of {wanted!r}", hint=f"{sites.source} has sites {','.join(sites.sites)}")
    seconds = sites_lab.up(sites, progress=_progress)
    which = f"kafkaops lab --lab {sites.name}"
    console.print(f"[green]lab {sites.name} up[/] in {seconds:.1f}s ({', '.join(sites.sites)}) — "
                  f"`{which} status` to inspect, `{which} down` to stop")


def _sites_inventory(base: Path) -> Any:
    """The inventory of the multi-site lab at ``base`` (its ``sites.json`` names it)."""
    import json

    from kafkaops.inventory import load_inventory

    return load_inventory(json.loads((base / "sites.json").read_text())["inventory"])


@app.command()
def down() -> None:
    """Stop every lab that is up (or the one --lab names), by pid; idempotent: with nothing up it
    stops nothing and exits 0. Data is wiped at the next `up`."""
    from kafkaops_lab import lab

    bases = _labs()
    if not bases:
        console.print("no lab is up")
        return
    for base in bases:
        n = lab.stop(base, progress=_progress)
        console.print(f"lab {lab.name(base)} down ({n} processes stopped)")
        for pidfile, pid in lab.strangers(base):
            err_console.print(f"[yellow]warning:[/] left pid {pid} running: {pidfile} names it but does not "
                              "prove it is the lab's (no start time, or another one: a reused pid); check it "
                              f"(`ps -o pid,lstart,args -p {pid}`) and stop it yourself if it is", highlight=False)


@app.command()
def status(output: TableOrJson = OutputOpt) -> None:
    """Every component of every lab that is up (or of the one --lab names) and its health.
    Exit 0 when all are healthy, 12 otherwise (also when no lab is up)."""
    from kafkaops_lab import dirs, lab
    from kafkaops_lab import sites as sites_lab

    labs = []
    for base in _labs() or [dirs.lab_dir()]:  # nothing up: the default lab says what it lacks
        components = (sites_lab.status(_sites_inventory(base)) if sites_lab.is_sites_lab(base)
                      else lab.status(base))
        labs.append((lab.name(base), base, components))
    healthy = all(c.healthy for _, _, components in labs for c in components)
    if output == TableOrJson.json:
        print_json({
            "healthy": healthy,
            "labs": [{"lab": name, "dir": str(base), "healthy": all(c.healthy for c in components)}
                     for name, base, components in labs],
            "components": [{"lab": name, **c.to_dict()} for name, _, components in labs for c in components],
        })
    else:
        from rich.table import Table

        for name, base, components in labs:
            table = Table(title=f"kafkaops lab {name}", caption=str(base))
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
    from kafkaops_lab.host import LabHost

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
    from kafkaops_lab.host import LabHost

    h = LabHost.named(host)
    h.power_off(clean=False)
    console.print(f"{h.host.name} crashed (all processes killed)")


@host_app.command("slow-shutdown")
def host_slow_shutdown(
    host: str = typer.Argument(..., help="Lab host, short name or FQDN."),
    seconds: float = typer.Argument(..., min=0, help="How long sshd stays up during a shutdown (0: off)."),
) -> None:
    """Make HOST's reboots slow to shut down, as real hosts are: after a reboot command its services stop,
    then SSH keeps answering with the old boot id (system state ``stopping``) for SECONDS before it goes
    down. Rehearses a run killed right after its reboot command (kafkaops must not reboot twice).
    The same as `kafkaops lab host knob HOST slow_shutdown SECONDS`."""
    from kafkaops_lab.host import LabHost

    h = LabHost.named(host)
    h.set_knob("slow_shutdown", seconds or None)
    console.print(f"{h.host.name}: slow shutdown {'off' if not seconds else f'{seconds:.0f}s'}")


def _knobs_help() -> str:
    from kafkaops_lab.host import KNOBS

    return "\n\n".join(f"{name}: {what}." for name, what in KNOBS.items())


@host_app.command("knob", help=f"""Set, clear or show the fault knobs of HOST (its knobs.json: they survive reboots).

    kafkaops lab host knob kafka1002 eventbus_fails_on_boot 1

    kafkaops lab host knob kafka1002 eventbus_fails_on_boot --clear

    kafkaops lab host knob kafka1002          (shows the knobs set)

Knobs:

{_knobs_help()}
""")
def host_knob(
    host: str = typer.Argument(..., help="Lab host, short name or FQDN."),
    name: str | None = typer.Argument(None, help="Knob name (see above); omitted: show the knobs set."),
    value: float | None = typer.Argument(None, min=0, help="Its value (seconds, or non-zero for on)."),
    clear: bool = typer.Option(False, "--clear", help="Clear the knob instead of setting it."),
) -> None:
    from kafkaops.cli.common import CommandLineError
    from kafkaops_lab.host import KNOBS, LabHost

    # Command-line mistakes first: a typo is a usage error whether or not the lab is up.
    if name is None and (clear or value is not None):
        raise CommandLineError(f"give the knob's NAME (knobs: {', '.join(KNOBS)})")
    if name is not None and name not in KNOBS:
        raise CommandLineError(f"unknown knob {name!r} (knobs: {', '.join(KNOBS)})")
    if name is not None and clear == (value is not None):
        raise CommandLineError(f"give {name} a VALUE, or --clear (not both)")
    h = LabHost.named(host)
    if name is None:
        knobs = h.knobs()
        console.print(f"{h.host.name}: " + (", ".join(f"{k}={v:g}" for k, v in sorted(knobs.items()))
                                             if knobs else "no knob set"), highlight=False)
        return
    h.set_knob(name, None if clear else value)
    console.print(f"{h.host.name}: {name} " + ("cleared" if clear else f"= {value:g}"), highlight=False)


@host_app.command("add")
def host_add(host: str | None = typer.Argument(None, help="The host to add (default: the next one, kafka1004 on "
                                               "the default lab)."),
             inventory: Path | None = typer.Option(None, "--inventory", "-i",
                                                   help="An inventory of the running lab that lists HOST (default: "
                                                        "the lab's own, with the next host added)."),
             controller: bool = typer.Option(False, "--controller",
                                             help="The KRaft lab: the next controller node (kafka-ctrl3004), "
                                                  "Kafka configured, not formatted, not running: for `kafkaops "
                                                  "controllers add`.")) -> None:
    """Start one more broker host on the running lab: sshd, eventbus (depooled), and a Kafka broker that joins
    the cluster holding no replica — a new machine, racked, for `kafkaops broker add` and `broker decommission`.
    Prints the inventory that names it (`kafkaops -i FILE ...`). `lab down` stops it with the rest."""
    from kafkaops.inventory import load_inventory
    from kafkaops_lab import lab
    from kafkaops_lab.dirs import lab_dir
    from kafkaops_lab.inventories import with_next_controller, with_next_host

    if inventory is None:
        source = _default_inventory()  # `kafkaops -i bench/lab-bench.yaml lab host add`: that lab's directory
        where = lab_dir(load_inventory(source).name)
        if controller:
            name, inventory = with_next_controller(source, where / f"{source.stem}-next-controller.yaml")
        else:
            name, inventory = with_next_host(source, where / f"{source.stem}-next-host.yaml")
        if host is not None and host != name:
            raise LabError(f"the next host of {source.name} is {name}, not {host}",
                           hint="give an inventory that lists it with --inventory")
        host = name
    if host is None:
        raise LabError("name the host to add from --inventory", hint="kafkaops lab host add HOST -i FILE")
    added = lab.add_host(load_inventory(inventory), host, progress=_progress)
    if added.role == "controller":
        console.print(f"{added.name} up: controller node {added.broker_id}, Kafka configured, storage not formatted "
                      f"(`kafkaops -i {inventory} controllers add {added.name}`); the inventory naming it: "
                      f"{inventory}", highlight=False)
        return
    console.print(f"{added.name} up: broker {added.broker_id} holds no replica, its eventbus is depooled; the "
                  f"inventory naming it: {inventory} (`kafkaops -i {inventory} broker ...`)", highlight=False)


@host_app.command("remove")
def host_remove(host: str = typer.Argument(..., help="A lab broker host holding no replica (decommissioned).")) -> None:
    """Take a decommissioned broker host out of the running lab: its processes stopped, its pool object
    deleted; `lab status` no longer lists it. Refused while its broker holds a replica."""
    from kafkaops_lab import lab

    removed = lab.remove_host(host, progress=_progress)
    console.print(f"{removed.name} removed from the lab", highlight=False)


@host_app.command("boot")
def host_boot(host: str = typer.Argument(..., help="Lab host, short name or FQDN.")) -> None:
    """Power on a crashed host: new boot id, sshd, then kafka and eventbus."""
    from kafkaops_lab.host import LabHost

    h = LabHost.named(host)
    t = time.monotonic()
    h.power_on()
    console.print(f"{h.host.name} booted in {time.monotonic() - t:.1f}s")


@app.command()
def load(
    seconds: float = typer.Option(10.0, "--seconds", "-s", min=0, help="How long to produce."),
    rate: float = typer.Option(200.0, min=0, help="Kafka messages per second (acks=all, idempotent)."),
    http_rate: float = typer.Option(10.0, min=0, help="HTTP events per second through the VIP (0 to skip)."),
    inventory: Path | None = InventoryOpt,
    output: TableOrJson = OutputOpt,
) -> None:
    """Produce and read back, and post events through the VIP; report lost, duplicated, failed.

    Exit 0 when nothing was lost, duplicated or failed; 9 otherwise.
    """
    from kafkaops.errors import CheckFailed
    from kafkaops.inventory import load_inventory
    from kafkaops_lab import lab
    from kafkaops_lab.load import run_load

    if not lab.is_up():
        raise LabError("the lab is not up", hint="start it with `kafkaops lab up`")
    report = run_load(load_inventory(inventory or _default_inventory()), seconds, rate=rate, http_rate=http_rate)
    if output == TableOrJson.json:
        print_json(report.to_dict())
    else:
        from rich.table import Table

        table = Table(title=f"load on {report.topic} for {report.seconds:.1f}s")
        table.add_column("measure")
        table.add_column("value", justify="right")
        for key in ("produced_acked", "consumed", "lost", "duplicated", "produce_errors", "http_sent",
                    "http_failed"):
            table.add_row(key.replace("_", " "), str(getattr(report, key)))
        console.print(table)
        for err in report.http_errors:
            console.print(f"  http error: {err}")
        for err in report.read_errors:
            console.print(f"  reader: {err}")
    if not report.clean:
        raise CheckFailed(f"load run not clean: lost={report.lost} duplicated={report.duplicated} "
                          f"http_failed={report.http_failed}")


@net_app.command("partition")
def net_partition(
    a: str = typer.Argument(..., help="admin, zookeeper, etcd, brokers or a lab host."),
    b: str = typer.Argument(..., help="The other side (nothing in common with A)."),
    duration: str | None = typer.Option(None, "--for", metavar="DURATION",
                                        help="Heal by itself after DURATION (30s, 2m); default: until `heal`."),
) -> None:
    """Cut A from B, both directions, by DROP (a connection hangs; it is not refused). The lab's processes
    all connect from 127.0.0.1, so a side's packets are told apart by its group id: each lab component
    runs with its own, and the admin is every process running with group 64600 (`setpriv --regid 64600
    --clear-groups kafkaops ...`). `kafka1002 zookeeper` cuts one broker's ZooKeeper session only."""
    from kafkaops.cli.common import CommandLineError
    from kafkaops.engine.step import parse_duration
    from kafkaops_lab import net
    from kafkaops_lab.spec import LabSpec

    try:
        seconds = parse_duration(duration) if duration is not None else None
    except ValueError as exc:
        raise CommandLineError(f"--for: {exc}") from None
    spec = LabSpec.load()
    rules = net.partition(spec, a, b, seconds=seconds)
    until = f" for {duration} (heals by itself)" if duration else " until `kafkaops lab net heal`"
    console.print(f"lab {spec.cluster}: {a} and {b} partitioned ({len(rules)} DROP/mark rules in "
                  f"{net.chain(spec.cluster)}){until}", highlight=False)


@net_app.command("heal")
def net_heal(a: str | None = typer.Argument(None, help="One side (omitted: heal every partition)."),
             b: str | None = typer.Argument(None, help="The other side.")) -> None:
    """Remove the partition between A and B, or every partition of the lab (its chain and jump too)."""
    from kafkaops.cli.common import CommandLineError
    from kafkaops_lab import net
    from kafkaops_lab.spec import LabSpec

    if (a is None) != (b is None):
        raise CommandLineError("give both sides of the partition to heal, or neither to heal them all")
    spec = LabSpec.load()
    removed = net.heal(spec, a, b)
    what = f"{a} and {b}" if a else "every partition"
    console.print(f"lab {spec.cluster}: healed {what} ({removed} rules removed)", highlight=False)


@net_app.command("show")
def net_show(output: TableOrJson = OutputOpt) -> None:
    """The partitions in force, their heal timers and their iptables rules."""
    from kafkaops_lab import net
    from kafkaops_lab.spec import LabSpec

    data = net.shown(LabSpec.load())
    if output == TableOrJson.json:
        print_json(data)
        return
    parts = data["partitions"]
    console.print(f"lab {data['lab']} ({data['chain']}; admin = group {net.ADMIN_GID}): "
                  + (", ".join(f"{p['a']} ~ {p['b']}" for p in parts) if parts else "no partition"),
                  highlight=False)
    for timer in data["heal_timers"]:
        console.print(f"  heals by itself: {timer}", highlight=False)
    for rule in data["rules"]:
        console.print(f"  {rule}", highlight=False, markup=False)
