"""The lab's writes to conftool: seed its pool objects and its discovery records.

Production never creates conftool objects (Puppet and confctl own them), so the product's adapters
(:class:`~kafkaops.systems.conftool.Conftool`, :class:`~kafkaops.systems.conftool.Discovery`) only read and
flip ``pooled``. The lab, which starts from an empty etcd, creates them through these subclasses — the
same real conftool library, each write still refusing itself in a dry-run.
"""

from __future__ import annotations

from collections.abc import Mapping

from kafkaops.systems.conftool import Conftool, Discovery
from kafkaops.systems.guard import write


class LabConftool(Conftool):
    """:class:`Conftool` that can also create pool objects (the lab seeds its pools)."""

    @write
    def ensure(self, fqdn: str, tags: Mapping[str, str], *, pooled: str, weight: int) -> None:
        """Create or overwrite an object (used by the lab to seed its pools)."""
        try:
            self._obj(fqdn, tags).update({"pooled": pooled, "weight": weight})
        except Exception as exc:
            raise self._unreachable(exc) from exc


    @write
    def remove(self, fqdn: str, tags: Mapping[str, str]) -> None:
        """Delete an object (a host taken out of the lab: ``lab host remove``)."""
        try:
            self._obj(fqdn, tags).delete()
        except Exception as exc:
            raise self._unreachable(exc) from exc


class LabDiscovery(Discovery):
    """:class:`Discovery` that can also create records (the two-site lab seeds them)."""

    @write
    def seed(self, service: str, dc: str, *, pooled: bool) -> None:
        """Create or overwrite a record (the lab seeds them)."""
        try:
            self._record(service, dc).update({"pooled": pooled, "references": [], "ttl": 5})
        except Exception as exc:
            raise self._unreachable(exc) from exc
