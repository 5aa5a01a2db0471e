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
