"""A lab host: its units (sshd, kafka, eventbus), its boot id, and its power.

A lab host behaves like a machine for everything kafkaops can observe: ``stop kafka`` blocks until
the broker process is gone; ``reboot`` takes down *every* process of the host (its sshd and any SSH
session included), changes the boot id, and after a few seconds boots it again, starting sshd and the
enabled units — which is what reboot detection by boot id and SSH-back waits are tested against.

Faults are rehearsed through **knobs** (``<host>/knobs.json``, :data:`KNOBS`; ``kafkaops lab host knob``):
a slow shutdown, an eventbus or a Kafka broker that does not come back at boot, an eventbus whose
produces fail. They live on the host's "disk", so they survive its reboots, as a real misconfiguration
would.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from kafkaops.errors import LabError
from kafkaops_lab import dirs, procs
from kafkaops_lab.dirs import HostDirs, host_dirs
from kafkaops_lab.spec import LabHostSpec, LabSpec

#: Units started at boot, in order (like enabled systemd units).
ENABLED_UNITS = ("kafka", "eventbus")
UNITS = ("sshd", *ENABLED_UNITS)
#: How long a unit may take to stop cleanly before SIGKILL. Kafka's controlled shutdown moves
#: leadership away first; on a loaded 2-core machine that can take a while.
STOP_TIMEOUT = {"kafka": 90.0, "eventbus": 15.0, "sshd": 5.0}
START_TIMEOUT = {"kafka": 90.0, "eventbus": 30.0, "sshd": 10.0}
#: systemd's Restart=on-failure / RestartSec for the broker, as production hosts run it. After a crash
#: the broker's ZooKeeper session outlives it by up to zookeeper.session.timeout.ms, and a broker
#: started sooner exits with NodeExists on /brokers/ids/<id>; the unit manager starts it again.
RESTART_SEC = {"kafka": 2.0}

#: The fault knobs a lab host honours, and what each does (``kafkaops lab host knob --help`` lists them).
KNOBS: dict[str, str] = {
    "slow_shutdown": "seconds: a reboot stops the services, then sshd stays up that long with the old boot "
                     "id and system state 'stopping', as a real host does while it shuts down",
    "eventbus_fails_on_boot": "non-zero: at boot, eventbus exits at once and never listens (it logs a line "
                              "saying so); `hostctl start eventbus` still starts it",
    "eventbus_produce_fails": "non-zero: every produce of eventbus fails with a Kafka-like error (its "
                              "failed-events log fills, as in a Kafka outage); read at request time",
    "kafka_fails_on_boot": "non-zero: at boot, the Kafka broker exits at once and never registers (it logs a "
                           "line saying so; `hostctl status kafka` says failed, as systemd does for a unit "
                           "whose start failed); `hostctl start kafka` still starts it",
}
EVENTBUS_FAILS_ON_BOOT = "eventbus_fails_on_boot"
KAFKA_FAILS_ON_BOOT = "kafka_fails_on_boot"


def _jar_version(jars: Path) -> str | None:
    """The Kafka release of a jar set (``kafka_2.13-3.9.1.jar``: 3.9.1), None without one."""
    import re

    for jar in sorted(jars.glob("kafka_*.jar")):
        m = re.fullmatch(r"kafka_[\d.]+-(\d+\.\d+\.\d+)\.jar", jar.name)
        if m:
            return m.group(1)
    return None


@dataclass
class LabHost:
    spec: LabSpec
    host: LabHostSpec

    @classmethod
    def named(cls, name: str, spec: LabSpec | None = None) -> LabHost:
        spec = spec or LabSpec.load()
        return cls(spec, spec.host(name))

    @property
    def dirs(self) -> HostDirs:
        return host_dirs(self.host.name, Path(self.spec.lab_dir))

    @property
    def env(self) -> dict[str, str]:
        return {procs.LAB_DIR_ENV: self.spec.lab_dir, procs.LAB_MEMBER_ENV: self.spec.lab_dir,
                procs.LAB_HOST_ENV: self.host.name}

    # --- units -----------------------------------------------------------------------------------
    @property
    def enabled_units(self) -> tuple[str, ...]:
        """What starts at boot: Kafka (on a migration lab's controller host, only once provisioned: its
        storage formatted), and eventbus on a host that serves it."""
        return tuple(u for u in ENABLED_UNITS if (u != "eventbus" or self.host.eventbus)
                     and (u != "kafka" or self.provisioned))

    @property
    def provisioned(self) -> bool:
        """Kafka is installed and set up here. Every node of the other labs is; a migration lab's controller
        host is once ``hostctl kafka-format`` wrote its storage's ``meta.properties`` (the migration's
        provisioning step), as a real controller host is once its Kafka storage is formatted; so is the KRaft
        lab's fourth controller (``lab host add --controller``), which ``kafkaops controllers add`` formats."""
        return not ((self.spec.migration or self.spec.kraft) and self.host.role == "controller") or (
            self.dirs.kafka_data / "meta.properties").exists()

    # --- configuration (the migration lab: what Puppet would write for the node's migration phase) ---
    def phase(self) -> str:
        """The node's configuration phase in a migration lab (:data:`configs.PHASES`)."""
        from kafkaops_lab import configs  # not on hostctl's every call (see its docstring)

        f = self.dirs.etc / "kafka-phase"
        return f.read_text().strip() if f.exists() else configs.initial_phase(self.host)

    def configure(self, phase: str) -> bool:
        """Write the node's ``server.properties`` for ``phase``; True if it changed. Takes effect at the
        broker's next start, as a configuration change does on a real host."""
        from kafkaops_lab import configs, security  # not on hostctl's every call (see its docstring)

        if not self.spec.migration:
            raise LabError(f"{self.host.name}: only a migration lab's nodes change configuration phase",
                           hint="kafkaops lab up --mode migration")
        try:
            text = configs.migration_properties(self.spec, self.host, self.dirs, phase)
        except ValueError as exc:
            raise LabError(str(exc), hint=f"phases: {', '.join(configs.PHASES)}") from exc
        path = self.dirs.etc / "server.properties"
        changed = not path.exists() or path.read_text() != text
        security.write_private(path, text)
        (self.dirs.etc / "kafka-phase").write_text(phase + "\n")
        if changed:
            self.record("kafka-config", phase=phase)
        return changed

    def storage_cluster_id(self) -> str | None:
        """The cluster id in this node's ``meta.properties`` (None: its storage was never formatted or used)."""
        meta = self.dirs.kafka_data / "meta.properties"
        if not meta.exists():
            return None
        found = dict(line.split("=", 1) for line in meta.read_text().splitlines() if "=" in line)
        return found.get("cluster.id") or None

    @property
    def jars(self) -> Path:
        """The Kafka this node has installed: the lab's release, or the one ``hostctl kafka-install`` put
        here (``etc/kafka-jars``, a migration lab's node upgraded to Kafka 4)."""
        pointer = self.dirs.etc / "kafka-jars"
        return Path(pointer.read_text().strip()) if pointer.exists() else Path(self.spec.kafka_jars)

    def kafka_version(self) -> str:
        """The Kafka version of the jars this node starts with (``kafka_2.13-3.9.1.jar``: 3.9.1)."""
        found = _jar_version(self.jars)
        if found is None:
            raise LabError(f"{self.host.name}: no Kafka jar in {self.jars}", hint="scripts/install.sh")
        return found

    def install(self, version: str) -> bool:
        """Install Kafka ``version`` here, as a package upgrade would: the release's jars (one of the jar sets
        scripts/install.sh fetched) are what the node starts with from its next start. True if it changed."""

        if not self.spec.migration:
            raise LabError(f"{self.host.name}: only a migration lab's nodes change Kafka release",
                           hint="kafkaops lab up --mode migration")
        sets = {_jar_version(p): p for p in (dirs.kafka_jars(kraft=False), dirs.kafka_jars(kraft=True))}
        if version not in sets:
            raise LabError(f"{self.host.name}: no Kafka {version} to install (the lab has "
                           f"{', '.join(sorted(v for v in sets if v))})", hint="scripts/install.sh fetches them")
        if self.jars.resolve() == sets[version].resolve():
            return False
        (self.dirs.etc / "kafka-jars").write_text(f"{sets[version]}\n")
        self.record("kafka-install", version=version)
        return True

    def format_storage(self, cluster_id: str, *, no_initial_controllers: bool = False) -> bool:
        """``kafka-storage format`` of this node's log directory with ``cluster_id``: True if it formatted,
        False if it already was (with that id); an error if it was with another. ``no_initial_controllers``:
        a controller joining a dynamic quorum (KIP-853) — it starts as an observer, with a directory id of
        its own, until ``add-controller`` makes it a voter."""
        import re
        import subprocess

        from kafkaops_lab import monitoring  # not on hostctl's every call (see its docstring)

        if not re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id):
            raise LabError(f"{cluster_id!r} is not a Kafka cluster id (22 characters of URL-safe base64)",
                           hint="read it from ZooKeeper: get /cluster/id")
        meta = self.dirs.kafka_data / "meta.properties"
        if meta.exists():
            found = dict(line.split("=", 1) for line in meta.read_text().splitlines() if "=" in line)
            if found.get("cluster.id") != cluster_id:
                raise LabError(f"{self.host.name}: storage already formatted for cluster {found.get('cluster.id')}",
                               hint="a node is formatted once, with the cluster's own id")
            return False
        argv = [str(self.dirs.bin / "kafka-storage"), "format", "-t", cluster_id, "-c",
                str(self.dirs.etc / "server.properties"), *(["--no-initial-controllers"] if no_initial_controllers
                                                            else [])]
        if self.spec.secured and self.spec.migration:
            argv = self._format_with_kafkaops_scram(argv)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        finally:
            (self.dirs.etc / "kafka-storage.args").unlink(missing_ok=True)
        if done.returncode != 0:
            raise LabError(f"{self.host.name}: kafka-storage format failed: {(done.stderr or done.stdout)[-300:]}")
        self.record("kafka-format", cluster_id=cluster_id)
        if self.spec.migration:  # the KRaft lab's fourth controller is not scraped: it comes and goes
            monitoring.provisioned(self.spec, [h for h in self.spec.controllers
                                               if LabHost(self.spec, h).provisioned])
        return True

    def _format_with_kafkaops_scram(self, argv: list[str]) -> list[str]:
        """The format as one JVM reading its main class and arguments from a 0600 argument file (``java
        @FILE``), with ``--add-scram`` for kafkaops: its password never on a command line. The secured
        migration lab's controllers check kafkaops' SCRAM credential before any is migrated from ZooKeeper
        (:func:`kafkaops_lab.security.controller_channel`)."""
        from kafkaops_lab import configs, security  # not on hostctl's every call (see its docstring)

        jars_file = self.dirs.etc / "kafka-jars"
        jars = jars_file.read_text().strip() if jars_file.exists() else str(self.spec.kafka_jars)
        argfile = self.dirs.etc / "kafka-storage.args"

        def quoted(arg: str) -> str:
            return "'" + arg.replace("\\", "\\\\").replace("'", "\\'") + "'"

        args = [configs.KRAFT_TOOLS["kafka-storage"], *argv[1:], "--add-scram",
                security.format_scram_argument(self.spec)]
        security.write_private(argfile, " ".join(quoted(a) for a in args) + "\n")
        return [self.spec.java, "-Xmx256m", "-Dlog4j.configuration=file:/dev/null", "-cp", f"{jars}/*", f"@{argfile}"]

    def deprovision(self) -> bool:
        """Remove a migration lab controller's storage (Kafka's revert "deprovisions the quorum"): True if
        there was one. Refused on a broker, and while Kafka runs here."""
        import shutil

        from kafkaops_lab import monitoring  # not on hostctl's every call (see its docstring)

        if not (self.spec.migration and self.host.role == "controller"):
            raise LabError(f"{self.host.name}: only a migration lab's controller is deprovisioned",
                           hint="a broker keeps its data; kafkaops lab up --mode migration")
        if self.unit_state("kafka") == "active":
            raise LabError(f"{self.host.name}: Kafka runs here; its storage is in use", hint="hostctl stop kafka")
        data = self.dirs.kafka_data
        if not data.exists() or not any(data.iterdir()):
            return False
        shutil.rmtree(data)
        data.mkdir(parents=True)
        self.record("kafka-deprovision")
        monitoring.provisioned(self.spec, [h for h in self.spec.controllers if LabHost(self.spec, h).provisioned])
        return True

    def replace_disk(self) -> bool:
        """A broker's disk replaced (``kafkaops broker replace`` rehearsed): its log directory emptied, as a new
        disk or a new machine under the same broker id comes: no ``meta.properties``, no partition. True if
        there was anything. Refused while Kafka runs here (the broker stopped first, as the runbook does)."""
        import shutil

        if self.host.role == "controller":
            raise LabError(f"{self.host.name}: a controller's storage is not a broker disk",
                           hint="replace a broker host's disk")
        if self.unit_state("kafka") in ("active", "activating"):
            raise LabError(f"{self.host.name}: Kafka runs here; its disk is in use", hint="hostctl stop kafka")
        data = self.dirs.kafka_data
        if not data.exists() or not any(data.iterdir()):
            return False
        shutil.rmtree(data)
        data.mkdir(parents=True)
        self.record("kafka-replace-disk")
        return True

    def argv(self, unit: str) -> list[str]:
        from kafkaops_lab import monitoring  # not on hostctl's every call (see its docstring)

        d = self.dirs
        if unit == "sshd":
            return ["/usr/sbin/sshd", "-D", "-e", "-f", str(d.etc / "sshd_config")]
        if unit == "kafka":
            # A controller-only node holds the metadata log, not partitions: a smaller heap.
            heap = (["-Xms128m", "-Xmx256m"] if self.host.role == "controller"
                    else ["-Xms192m", f"-Xmx{self.spec.broker_heap}"])
            logging = (f"-Dlog4j2.configurationFile={d.etc / 'log4j2.properties'}" if self.spec.kraft
                       else f"-Dlog4j.configuration=file:{d.etc / 'log4j.properties'}")
            if self.spec.migration:  # 3.9 or 4.x, whichever is installed: each reads its own setting
                logging += f" -Dlog4j2.configurationFile={d.etc / 'log4j2.properties'}"
            # Prometheus' JMX exporter, as production brokers run it (lab/kafkaops_lab/monitoring.py).
            agent = ([monitoring.jmx_agent_arg(self.spec, self.host, monitoring.jmx_rules_file(self.spec))]
                     if self.spec.jmx_agent else [])
            return [
                self.spec.java, *heap, "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=50",
                "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Djava.awt.headless=true", *agent,
                *logging.split(), f"-Dkafka.logs.dir={d.log}",
                "-cp", f"{self.jars}/*", "kafka.Kafka", str(d.etc / "server.properties"),
            ]
        if unit == "eventbus" and self.host.eventbus:
            return [self.spec.python, "-m", "kafkaops_lab.eventbus", "--host", self.host.name]
        raise LabError(f"unknown unit {unit!r} on {self.host.name}", hint=f"units: {', '.join(UNITS)}")

    def port(self, unit: str) -> int:
        return {"sshd": self.host.ssh_port, "kafka": self.host.kafka_port, "eventbus": self.host.http_port}[unit]

    def pid(self, unit: str) -> int | None:
        return procs.live_pid(self.dirs.pidfile(unit))

    def is_active(self, unit: str) -> bool:
        return self.pid(unit) is not None

    def _marker(self, unit: str, state: str) -> Path:
        return self.dirs.run / f"{unit}.{state}"

    def unit_state(self, unit: str) -> str:
        """``systemctl is-active``'s word for ``unit``: ``active`` (its process lives), ``activating``
        (being started: a start, or a restart after it exited, is under way), ``failed`` (its start at
        boot failed, or its restarts ran out), else ``inactive``.

        A wait for a broker tells "still starting" from "will not come back" by this word, so the lab
        says it as systemd does: a unit between two automatic restarts is not down.
        """
        if self.is_active(unit):
            return "active"
        if procs.live_pid(self._marker(unit, "activating")) is not None:  # the starting process still runs
            return "activating"
        return "failed" if self._marker(unit, "failed").exists() else "inactive"

    def start(self, unit: str, *, wait: bool = True) -> int:
        """Start ``unit`` unless it already runs (idempotent, like ``systemctl start``); a unit with a
        restart policy is started again when it exits before listening, until its start timeout."""
        self.argv(unit)  # validate the unit name before touching anything
        deadline = time.monotonic() + START_TIMEOUT[unit]
        self.dirs.run.mkdir(parents=True, exist_ok=True)
        self._marker(unit, "failed").unlink(missing_ok=True)
        if wait:
            self._marker(unit, "activating").write_text(f"{os.getpid()}\n")
        try:
            return self._start(unit, wait, deadline)
        except LabError:
            self._marker(unit, "failed").touch()  # as systemd: a start that failed leaves the unit failed
            raise
        finally:
            if wait:
                self._marker(unit, "activating").unlink(missing_ok=True)

    def _start(self, unit: str, wait: bool, deadline: float) -> int:
        while True:
            pid = self.pid(unit)
            if pid is None:
                if unit == "sshd":
                    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
                pid = procs.spawn(self.argv(unit), log=self.dirs.logfile(unit), pidfile=self.dirs.pidfile(unit),
                                  env=self.env, cwd=self.dirs.root, group=procs.identity_gid(self.host.address))
            if not wait:
                return pid
            try:
                procs.wait_port(self.host.address, self.port(unit), max(0.0, deadline - time.monotonic()),
                                pid=pid, what=f"{unit} on {self.host.name}")
                return pid
            except RuntimeError as exc:  # exited before listening
                if unit in RESTART_SEC and time.monotonic() + RESTART_SEC[unit] < deadline:
                    time.sleep(RESTART_SEC[unit])
                    continue
                raise LabError(str(exc), hint=f"see {self.dirs.logfile(unit)} and the log directory beside it") from exc
            except TimeoutError as exc:
                raise LabError(str(exc), hint=f"see {self.dirs.logfile(unit)}") from exc

    def stop(self, unit: str, *, sig: int = signal.SIGTERM) -> bool:
        """Stop ``unit`` and block until its process is gone. Returns False if it was not running."""
        pid = self.pid(unit)
        if pid is None:
            return False
        if unit == "kafka":
            self.record("kafka-stop", pid=pid)
        procs.terminate([pid], timeout=STOP_TIMEOUT[unit], sig=sig)
        return True

    # --- what the host itself witnessed, and its knobs -------------------------------------------
    def record(self, event: str, **fields: object) -> None:
        """Append to the host's own event log (``events.jsonl``): reboot commands received, boots.
        Tests count side effects from here, not from what kafkaops says it did."""
        with open(self.dirs.root / "events.jsonl", "a") as f:
            f.write(json.dumps({"t": round(time.time(), 3), "event": event, **fields}) + "\n")

    def events(self, event: str | None = None) -> list[dict[str, object]]:
        try:
            lines = (self.dirs.root / "events.jsonl").read_text().splitlines()
        except FileNotFoundError:
            return []
        out = [json.loads(line) for line in lines if line.strip()]
        return [e for e in out if event is None or e["event"] == event]

    def knobs(self) -> dict[str, float]:
        """Fault knobs (``knobs.json``), name to value; :data:`KNOBS` says what each does."""
        try:
            return dict(json.loads((self.dirs.root / "knobs.json").read_text()))
        except FileNotFoundError:
            return {}

    def set_knob(self, name: str, value: float | None) -> None:
        """Set knob ``name`` (None: clear it). Written atomically (temporary file, rename): the eventbus
        service reads the file while requests are served and must never see half of it.

        Raises:
            LabError: ``name`` is not a knob of :data:`KNOBS` (a typo would otherwise silently do nothing).
        """
        if name not in KNOBS:
            raise LabError(f"unknown knob {name!r}", hint=f"knobs: {', '.join(KNOBS)}")
        knobs = self.knobs()
        if value is None:
            knobs.pop(name, None)
        else:
            knobs[name] = value
        path = self.dirs.root / "knobs.json"
        tmp = path.with_name(f".knobs.{os.getpid()}.json")
        tmp.write_text(json.dumps(knobs, sort_keys=True))
        os.replace(tmp, path)

    def _fail_at_boot(self, unit: str) -> None:
        """The ``<unit>_fails_on_boot`` fault: the unit exits at once without listening, as a service with
        a broken configuration does under systemd (``failed``), and says so in its log."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime()) + f".{int(time.time() * 1000) % 1000:03d}"
        line = (f"{stamp} (MainThread) {unit} failed to start at boot: knob {unit}_fails_on_boot is set on "
                f"{self.host.name} (lab fault); not listening on {self.host.address}:{self.port(unit)}\n")
        # Kafka's line goes where its log is read (`hostctl log kafka`: the log4j server log), in its shape.
        log = self.dirs.log / "kafka-server.log" if unit == "kafka" else self.dirs.logfile(unit)
        if unit == "kafka":
            line = f"[{stamp[:10]} {stamp[11:19]},{stamp[20:23]}] ERROR " + line.split(") ", 1)[1]
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as f:
            f.write(line)
        self.dirs.pidfile(unit).unlink(missing_ok=True)
        self.dirs.run.mkdir(parents=True, exist_ok=True)
        self._marker(unit, "failed").touch()
        self.record("unit-failed", unit=unit, reason=f"{unit}_fails_on_boot")

    def system_state(self) -> str:
        """``systemctl is-system-running``'s answer: ``stopping`` during a shutdown, else ``running``."""
        return "stopping" if (self.dirs.run / "stopping").exists() else "running"

    # --- the machine -----------------------------------------------------------------------------
    def boot_id(self) -> str:
        try:
            return self.dirs.boot_id_file.read_text().strip()
        except FileNotFoundError:
            return ""

    def is_up(self) -> bool:
        return self.is_active("sshd")

    def processes(self) -> list[int]:
        """Every live process of this host: its units, their descendants (SSH sessions), and any
        process carrying the host's environment marker (services started over SSH)."""
        units = [p for u in UNITS if (p := self.pid(u)) is not None]
        found = units + procs.descendants(units) + procs.marked_pids(Path(self.spec.lab_dir), self.host.name)
        return sorted(set(found))

    def power_on(self, *, wait: bool = True) -> None:
        """Boot: a new boot id, then sshd, then the enabled units (an eventbus with the
        ``eventbus_fails_on_boot`` knob fails at once instead)."""
        if self.is_up():
            raise LabError(f"{self.host.name} is already up")
        boot_id = str(uuid.uuid4())
        self.dirs.boot_id_file.write_text(f"{boot_id}\n")
        (self.dirs.run / "stopping").unlink(missing_ok=True)
        self._clear_unit_markers()
        self.record("boot", boot_id=boot_id)
        self.start("sshd", wait=wait)
        knobs = self.knobs()
        units = [u for u in self.enabled_units if not knobs.get(f"{u}_fails_on_boot")]
        for unit in self.enabled_units:
            if unit in units:
                self.start(unit, wait=False)
            else:
                self._fail_at_boot(unit)
        if wait:
            for unit in units:
                self.start(unit, wait=True)

    def power_off(self, *, clean: bool) -> None:
        """Take down every process of this host: units first (cleanly, if ``clean``), then the rest."""
        if clean:
            for unit in reversed(UNITS):
                if unit != "sshd":
                    self.stop(unit)
        procs.terminate(self.processes(), timeout=5.0 if clean else 0.0,
                        sig=signal.SIGTERM if clean else signal.SIGKILL)
        for unit in UNITS:
            self.dirs.pidfile(unit).unlink(missing_ok=True)
        self._clear_unit_markers()

    def _clear_unit_markers(self) -> None:
        """A unit's failed/activating state lives in the host's /run: gone with a power-off or a boot."""
        for unit in UNITS:
            for state in ("failed", "activating"):
                self._marker(unit, state).unlink(missing_ok=True)

    def reboot(self, *, down_for: float = 3.0) -> None:
        """Clean shutdown, a few seconds of being down (SSH refused), then boot with a new boot id.

        With the ``slow_shutdown`` knob the services stop first and sshd stays up that many seconds
        longer, answering with the old boot id and ``stopping`` as the system state."""
        slow = float(self.knobs().get("slow_shutdown", 0))
        if slow > 0:
            self.dirs.run.mkdir(parents=True, exist_ok=True)
            (self.dirs.run / "stopping").touch()
            for unit in reversed(ENABLED_UNITS):
                self.stop(unit)
            time.sleep(slow)
        self.power_off(clean=True)
        time.sleep(down_for)
        self.power_on(wait=True)

    def spawn_detached(self, action: str) -> int:
        """Run ``hostctl _ACTION`` in its own session, outside this host's process set.

        A reboot requested over SSH kills the SSH session that asked for it; the work must run in a
        process that survives that, like the kernel does on a real machine.
        """
        import subprocess

        env = {k: v for k, v in os.environ.items() if k != procs.LAB_HOST_ENV}
        env[procs.LAB_DIR_ENV] = env[procs.LAB_MEMBER_ENV] = self.spec.lab_dir
        log = self.dirs.logfile("power")
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [self.spec.python, "-m", "kafkaops_lab.hostctl", "--host", self.host.name, f"_{action}"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                start_new_session=True, close_fds=True,
            )
        return proc.pid
