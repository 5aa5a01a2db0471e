"""The lab's own inventories: the lab names them, the product never searches them.

``kafkaops lab up`` (and ``--mode``, ``--sites``, ``--brokers/--dcs``) starts the lab an inventory of its
own describes. They travel with the lab: a wheel carries the repo's ``inventory/lab*.yaml`` as
``kafkaops_lab/inventory/`` (``lab/setup.py`` copies them at build time); a checkout reads the source,
``inventory/`` at its top. A production command never looks here — with no inventory of the operator's
it stops with the places it searched (:mod:`kafkaops.places`), rather than act on the lab's addresses.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

#: The default lab's inventory.
LAB = "lab.yaml"


def inventory_dir() -> Path:
    """Where the lab's inventories are: the package's copy (a wheel), else the checkout's ``inventory/``."""
    shipped = Path(str(files("kafkaops_lab"))) / "inventory"
    if (shipped / LAB).is_file():
        return shipped
    return Path(__file__).resolve().parents[2] / "inventory"


def lab_inventory(name: str = LAB) -> Path:
    """One of the lab's inventories by file name (``lab.yaml``, ``lab-kraft.yaml``, ``lab-sites.yaml``)."""
    return inventory_dir() / name


def with_next_host(source: Path, out: Path) -> tuple[str, Path]:
    """``source`` with one more broker host, the next of its hosts (``kafka1004`` after ``kafka1003``: the
    next address, broker id and rack letter, the same DC, services and pool), written to ``out``: what an
    operator's inventory holds once a new machine is racked, and what ``lab host add`` starts. Returns the
    new host's name and ``out``."""
    import re

    import yaml

    data = yaml.safe_load(source.read_text())
    hosts = data["hosts"]
    last_name, last = next(reversed(hosts.items()))
    number = re.fullmatch(r"(\D+)(\d+)", last_name)
    if number is None:
        raise ValueError(f"{source}: cannot number a host after {last_name!r}")
    name = f"{number.group(1)}{int(number.group(2)) + 1}"
    head, octet = str(last["address"]).rsplit(".", 1)
    rack = str(last.get("rack", ""))
    entry = {**last, "fqdn": str(last["fqdn"]).replace(last_name, name, 1), "address": f"{head}.{int(octet) + 1}",
             "broker_id": int(last["broker_id"]) + 1,
             "rack": chr(ord(rack) + 1) if len(rack) == 1 and rack.isalpha() else rack}
    hosts[name] = entry
    out.write_text(f"# {source.name} with {name} added by `kafkaops lab host add` (a new machine, racked)\n"
                   + yaml.safe_dump(data, sort_keys=False))
    return name, out


def with_next_controller(source: Path, out: Path) -> tuple[str, Path]:
    """``source`` (a KRaft inventory) with one more controller node, the next of its ``controllers:``
    (``kafka-ctrl3004`` after ``kafka-ctrl3003``: the next address after every host's, node id and rack
    letter, the same DC), written to ``out``: what ``lab host add --controller`` starts and ``kafkaops
    controllers add`` adds. Returns the new node's name and ``out``."""
    import re

    import yaml

    data = yaml.safe_load(source.read_text())
    controllers = data.get("controllers") or {}
    if not controllers:
        raise ValueError(f"{source}: no controllers: to add one after")
    last_name, last = next(reversed(controllers.items()))
    number = re.fullmatch(r"(\D+)(\d+)", last_name)
    if number is None:
        raise ValueError(f"{source}: cannot number a controller after {last_name!r}")
    name = f"{number.group(1)}{int(number.group(2)) + 1}"
    head = str(last["address"]).rsplit(".", 1)[0]
    taken = {int(str(h["address"]).rsplit(".", 1)[1]) for h in (*data.get("hosts", {}).values(), *controllers.values())}
    rack = str(last.get("rack", ""))
    entry = {**last, "fqdn": str(last["fqdn"]).replace(last_name, name, 1), "address": f"{head}.{max(taken) + 1}",
             "node_id": int(last["node_id"]) + 1,
             "rack": chr(ord(rack) + 1) if len(rack) == 1 and rack.isalpha() else rack}
    controllers[name] = entry
    out.write_text(f"# {source.name} with controller {name} added by `kafkaops lab host add --controller`\n"
                   + yaml.safe_dump(data, sort_keys=False))
    return name, out
