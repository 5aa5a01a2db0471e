"""Shared fixtures. Tests marked ``lab`` run against the real local lab, started once per session.

If a lab is already up (an operator's, or a developer's), tests use it and leave it running;
otherwise the session starts one and stops it at the end. ``KAFKAOPS_TEST_INVENTORY`` points the
tests at another lab inventory (other loopback addresses, other ``KAFKAOPS_LAB_DIR``), so two labs can
run side by side.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

from kafkaops.model import Cluster

REPO = Path(__file__).resolve().parent.parent


def _test_inventories() -> Path:
    """The test session's inventory directory, named the way an operator's is: ``$XDG_CONFIG_HOME/kafkaops/
    inventory/`` holding (symlinks to) the repo's lab inventories. kafkaops never reads the repo's
    ``inventory/`` by itself (a production command must not fall back to the lab's), so the session
    says where its inventories are, before anything is imported or spawned: every subprocess inherits it.
    An operator's own ``~/.config/kafkaops`` is never read by the tests."""
    import atexit
    import shutil
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="kafkaops-test-config-"))
    atexit.register(shutil.rmtree, root, True)
    inventories = root / "kafkaops" / "inventory"
    inventories.mkdir(parents=True)
    for f in sorted((REPO / "inventory").glob("*.yaml")):
        if ".example." not in f.name:
            (inventories / f.name).symlink_to(f)
    os.environ["XDG_CONFIG_HOME"] = str(root)
    os.environ["KAFKAOPS_SYSCONFDIR"] = str(root / "no-etc")  # the machine's /etc/kafkaops is not the tests'
    return inventories


#: Where the session's inventories are found (the repo's, through ``$XDG_CONFIG_HOME``).
TEST_INVENTORIES = _test_inventories()


def _lab_commands() -> None:
    """``kafkaops lab`` is the lab's distribution's (``lab/``, kafkaops-lab): it registers through the entry
    point ``kafkaops.commands: lab``, read from installed metadata. A checkout where kafkaops-lab is not
    installed (scripts/install.sh installs it editable) has neither its package nor its entry point, so the
    session adds both — ``lab/`` and metadata of its own — on ``sys.path`` and ``PYTHONPATH`` (its
    subprocesses): the lab's commands are found exactly as in a wheel, never by the CLI importing the lab."""
    import tempfile
    from importlib.metadata import entry_points

    if any(ep.name == "lab" for ep in entry_points(group="kafkaops.commands")):
        return
    import atexit
    import shutil
    import sys

    root = Path(tempfile.mkdtemp(prefix="kafkaops-test-entry-points-"))
    atexit.register(shutil.rmtree, root, True)
    info = root / "kafkaops_test_lab_commands-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kafkaops-test-lab-commands\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[kafkaops.commands]\nlab = kafkaops_lab.cli:app\n")
    paths = [str(REPO), str(REPO / "lab"), str(root)]
    sys.path.extend(p for p in paths if p not in sys.path)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), *paths) if p)


_lab_commands()


#: Per-test timeout of tests marked ``lab`` (pytest-timeout; other tests get pyproject.toml's 60 s): a
#: reboot or a roll on the lab takes minutes, and the first lab test of a session also starts the lab.
LAB_TIMEOUT = 900
#: Tests marked ``slow`` (and not ``lab``): a real Spark start took 60 s on a loaded 2-core machine.
SLOW_TIMEOUT = 300


#: The labs that run beside the default one, each a fixture of its own, in the order their tests run.
SIDE_LABS = ("stretch", "kraft", "migration", "sites")


def _side_lab(module: list[pytest.Item]) -> int:
    """Where a module's tests go: -1 without a lab (the unit tests: the first failures to show), 0 with the
    default lab, 1 + the index in :data:`SIDE_LABS` of the side lab its tests use."""
    used = {name for item in module for name in getattr(item, "fixturenames", ())}
    if not any(item.get_closest_marker("lab") for item in module):
        return -1
    return next((1 + i for i, lab in enumerate(SIDE_LABS) if lab in used), 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``lab`` get :data:`LAB_TIMEOUT`, ``slow`` ones :data:`SLOW_TIMEOUT`, unless they set
    their own ``timeout`` mark.

    Modules run in groups: those without a lab first, then the default lab's, then by the side lab they
    need (stretch, KRaft, migration, two-site): a side lab starts once for its group (:func:`_kept_up` keeps
    it up between two modules that both need it) instead of once per module — a start and a stop cost a
    minute."""
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue
        if item.get_closest_marker("lab") is not None:
            item.add_marker(pytest.mark.timeout(LAB_TIMEOUT))
        elif item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    items[:] = [item for module in sorted(modules.values(), key=_side_lab) for item in module]


#: The test that runs after the current one (pytest's ``nextitem``): a side lab's fixture, torn down after
#: a module's last test, keeps the lab up when the next module needs it too.
_NEXT: list[pytest.Item | None] = [None]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The next test as pytest's teardown sees it: None once the session is stopping (``-x`` after a
    failure), though one was scheduled — pytest then tears everything down, and so must a kept lab."""
    _NEXT[0] = nextitem


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No test comes next: the session is ending (its last test ran, ``-x`` stopped it, or it was
    interrupted), and what is still set up is torn down after this hook. A side lab kept up for the test
    that was to come next is stopped then, not left running (found: ``-x`` after a failure left the
    migration lab up, and the next session's fixture used that half-migrated lab as it was)."""
    _NEXT[0] = None


def _next_test_uses(fixture: str) -> bool:
    nextitem = _NEXT[0]
    return nextitem is not None and fixture in getattr(nextitem, "fixturenames", ())


def lab_inventory() -> Path:
    return Path(os.environ.get("KAFKAOPS_TEST_INVENTORY") or REPO / "inventory" / "lab.yaml")


#: The labs this session started and still owns (it stops them; a lab it found up it leaves alone).
_STARTED: set[str] = set()


@contextmanager
def _kept_up(cluster: Cluster, is_up: Callable[[], bool], up: Callable[[], Any], down: Callable[[], Any],
             fixture: str = "") -> Iterator[Cluster]:
    """A lab up for the block: started here if it is down (and then stopped at the end, unless
    KAFKAOPS_KEEP_LAB or the next test needs ``fixture`` too), used as it is if someone's lab is already
    up."""
    if not is_up():
        up()
        _STARTED.add(cluster.name)
    try:
        yield cluster
    finally:
        keep = os.environ.get("KAFKAOPS_KEEP_LAB") or (fixture and _next_test_uses(fixture))
        if cluster.name in _STARTED and not keep:
            _STARTED.discard(cluster.name)
            down()


def _running(cluster: Cluster, base: Path | None = None, fixture: str = "") -> AbstractContextManager[Cluster]:
    """``cluster``'s lab (one site) up for the block."""
    from kafkaops_lab import lab

    return _kept_up(cluster, lambda: lab.is_up(base), lambda: lab.up(cluster), lambda: lab.down(base), fixture)


@pytest.fixture(scope="session")
def lab_cluster() -> Iterator[Cluster]:
    """The lab's inventory, with the lab up (started here if needed, stopped at the end if so)."""
    from kafkaops.inventory import load_inventory

    with _running(load_inventory(lab_inventory())) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def stretch() -> Iterator[Cluster]:
    """The stretch lab (issues 15 and 19): four brokers over two DCs, beside the default lab; started for
    the module that needs it unless one is up."""
    from kafkaops.inventory import load_inventory
    from kafkaops_lab.dirs import lab_dir

    cluster = load_inventory(REPO / "inventory" / "lab-stretch.yaml")
    with _running(cluster, lab_dir(cluster.name), "stretch") as running:
        yield running


@pytest.fixture(scope="module")
def kraft() -> Iterator[Cluster]:
    """The KRaft lab (issue 16): Kafka 4.x, three controller nodes and three brokers, no ZooKeeper, beside
    the default lab; started for the module that needs it unless one is up."""
    from kafkaops.inventory import load_inventory
    from kafkaops_lab.dirs import lab_dir

    cluster = load_inventory(REPO / "inventory" / "lab-kraft.yaml")
    with _running(cluster, lab_dir(cluster.name), "kraft") as running:
        yield running


@pytest.fixture(scope="module")
def migration() -> Iterator[Cluster]:
    """The migration lab (issue 33): the ZooKeeper lab's cluster with three KRaft controller hosts prepared,
    beside the default lab; started for the module that needs it unless one is up."""
    from kafkaops.inventory import load_inventory
    from kafkaops_lab.dirs import lab_dir

    cluster = load_inventory(REPO / "inventory" / "lab-migration.yaml")
    with _running(cluster, lab_dir(cluster.name), "migration") as running:
        yield running


@pytest.fixture(scope="module")
def sites() -> Iterator[Cluster]:
    """The two-site lab (issue 17): main-eqiad and main-codfw with MirrorMaker 2 between them and the
    eventbus discovery records; started for the module that needs it unless it is up (then used as is)."""
    from kafkaops.inventory import load_inventory
    from kafkaops_lab import sites as sites_lab

    cluster = load_inventory(REPO / "inventory" / "lab-sites.yaml")
    with _kept_up(cluster, lambda: sites_lab.mirror_pid(sites_lab.sites_dir(cluster)) is not None,
                  lambda: sites_lab.up(cluster), lambda: sites_lab.down(cluster), "sites") as running:
        yield running


@pytest.fixture(scope="session")
def built_dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The package as an operator gets it: ``python -m build`` (an sdist, then the wheel built from that
    sdist: what the sdist lacks, the wheel lacks), and the lab's wheel, of a copy of this tree — its files as
    git sees them, committed or not, without build junk — so nothing is written into the checkout.
    ``{"wheel", "sdist", "lab_wheel"}``."""
    import shutil
    import subprocess
    import sys

    src = tmp_path_factory.mktemp("src")
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(src)], check=True, capture_output=True,
                   timeout=600)
    # The lab's own distribution: a wheel only, built from the tree (lab/setup.py takes ../inventory/lab*.yaml)
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(out), str(src / "lab")], check=True,
                   capture_output=True, timeout=600)
    return {"wheel": next(out.glob("kafkaops-*.whl")), "sdist": next(out.glob("kafkaops-*.tar.gz")),
            "lab_wheel": next(out.glob("kafkaops_lab-*.whl"))}


@pytest.fixture
def lab_secrets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A lab directory holding only what the secured lab inventories name for kafkaops (its CA, its 0600
    password files), for tests that build a client (or a Kafka tool's ``--command-config``) from a lab
    inventory without a lab: every client checks those files before it is built. Every lab's directory
    variable (``KAFKAOPS_LAB_DIR``, ``KAFKAOPS_LAB_DIR_LAB_MIGRATION``, ...) points at it, so a test never
    depends on a lab having once run on the machine (found: a clean CI machine has no ~/.local/state).
    Returns the directory."""
    base = tmp_path / "labdir"
    (base / "tls").mkdir(parents=True)
    (base / "tls" / "ca.pem").write_text(Path("/etc/ssl/certs/ca-certificates.crt").read_text())  # valid PEM
    (base / "secrets").mkdir(mode=0o700)
    for name in ("kafkaops", "zookeeper"):
        password = base / "secrets" / f"{name}.password"
        password.write_text("lab-password\n")
        password.chmod(0o600)
    for variable in ("KAFKAOPS_LAB_DIR", *(f"KAFKAOPS_LAB_DIR_LAB_{lab}" for lab in
                                           ("STRETCH", "KRAFT", "MIGRATION", "EQIAD", "CODFW", "BENCH"))):
        monkeypatch.setenv(variable, str(base))
    return base
