"""The inventory's JSON Schema (issue 45): what an editor shows and checks while an operator types, held to
what the reader (:mod:`kafkaops.inventory`) accepts.

The reader is the authority; the schema only describes it to editors, and a description that drifts is worse
than none: an editor that flags a key the reader accepts teaches operators to ignore it, one that offers a
key the reader refuses sends them to ``inventory check`` to learn otherwise. So: every shipped inventory and a
filled-in ``inventory init`` draft validate; the keys of every section are exactly the keys the reader
accepts there — found by asking the reader, not by reading its source (an unknown key put in each section of
a complete inventory, the reader's ``allowed:`` list for it, each listed key tried); a document the reader
refuses for an unknown key or a wrong type, the schema refuses too.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from typer.testing import CliRunner

from kafkaops.inventory import ENVIRONMENTS, OPTIONAL_COMMANDS, REQUIRED_COMMANDS, check_inventory
from kafkaops.inventory_draft import SeenBroker, SeenCluster, draft
from kafkaops.model import KAFKA_PROTOCOLS, SASL_MECHANISMS

REPO = Path(__file__).resolve().parents[2]
SHIPPED = REPO / "kafkaops" / "schemas" / "inventory.schema.json"

#: Absolute paths that never exist: the reader checks a secret file's mode only when the file is there.
CA, CERT, KEY, PASSWORD = (f"/nonexistent/kafkaops-schema-test/{n}" for n in ("ca.pem", "c.pem", "c.key", "pw"))
#: Every key the reader accepts, each section present once: a cluster being migrated to KRaft (so that both
#: kafka.zookeeper and controllers: are allowed). Of each either/or (password_file or password_env), one.
FULL: dict[str, Any] = {
    "cluster": "main-eqiad",
    "environment": "production",
    "kafka": {
        "bootstrap_servers": "kafka1001.eqiad.wmnet:9093",
        "zookeeper": "zk1001.eqiad.wmnet:2182/kafka/main",
        "migration": "to-kraft",
        "security": {"protocol": "SASL_SSL", "ca_file": CA, "cert_file": CERT, "key_file": KEY,
                     "sasl": {"mechanism": "SCRAM-SHA-512", "username": "kafkaops", "password_file": PASSWORD}},
        "zookeeper_security": {"ca_file": CA, "cert_file": CERT, "key_file": KEY,
                               "digest": {"username": "kafkaops", "password_env": "ZK_PASSWORD"}},
    },
    "conftool": {"etcd": "https://conf1001.eqiad.wmnet:4001", "config": "/etc/conftool/config.yaml", "weight": 10,
                 "tls": {"ca_file": CA, "cert_file": CERT, "key_file": KEY}},
    "checkpoints": {"changeprop": "The Services team has paused ChangeProp"},
    "monitoring": {
        "prometheus": "https://prometheus.example.org", "alertmanager": "https://alertmanager.example.org",
        "host_matchers": {"instance": "{host.fqdn}:.*"}, "scope": {"cluster": "{cluster.name}"},
        "roll_alerts": ["KafkaUnderReplicatedPartitions"],
        "gates": [{"name": "under_min_isr", "query": "sum(x)", "max": 0, "max_ratio": 1.5}],
        "auth": {"ca_file": CA, "username": "kafkaops", "password_file": PASSWORD},
    },
    "ssh": {"address": "unused", "port": 22, "user": "kafkaops", "key_file": "~/.ssh/id_ed25519",
            "known_hosts": "~/.ssh/known_hosts", "proxy_jump": "me@bastion:22"},
    "commands": dict.fromkeys(REQUIRED_COMMANDS + OPTIONAL_COMMANDS, "true"),
    "services": {"eventbus": {
        "port": 8085, "vip": "eventbus.svc.eqiad.wmnet", "active": True, "health_path": "/v1/_info",
        "events_path": "/v1/events", "log_file": "/var/log/eventbus.log", "failed_events_log": "/srv/{host.name}.log",
        "error_patterns": ["Failed processing event"], "baseline": {"requests_per_second": 4425.03, "note": "2016"}}},
    "deploy_host": {"name": "deploy1002", "fqdn": "deploy1002.eqiad.wmnet", "address": "deploy1002.eqiad.wmnet",
                    "ssh": {"port": 22}, "commands": {"deploy": "true"}},
    "hosts": {"kafka1001": {
        "fqdn": "kafka1001.eqiad.wmnet", "address": "kafka1001.eqiad.wmnet", "broker_id": 1001, "dc": "eqiad",
        "rack": "a", "ssh": {"port": 22}, "services": ["eventbus"], "conftool": {"dc": "eqiad", "cluster": "eventbus"},
        "commands": {"reboot": "true"}}},
    "controllers": {"kafka-ctrl1001": {
        "fqdn": "kafka-ctrl1001.eqiad.wmnet", "address": "kafka-ctrl1001.eqiad.wmnet", "node_id": 3001,
        "dc": "eqiad", "rack": "a", "ssh": {"port": 22}, "commands": {"kafka_stop": "true"}}},
}
#: A multi-site inventory with every key; its sites are FULL in two DCs (written beside it).
SITES: dict[str, Any] = {
    "sites": "main", "environment": "lab", "clusters": {"eqiad": "eqiad.yaml", "codfw": "codfw.yaml"},
    "discovery": {"etcd": "https://conf1001.eqiad.wmnet:4001", "config": "/etc/conftool/config.yaml",
                  "tls": {"ca_file": CA, "cert_file": CERT, "key_file": KEY}},
    "switchover": {"eventbus": {"discovery": "eventbus", "consumer_groups": ["changeprop-main"]}},
}
UNKNOWN = "zz_not_a_key"
#: A place in a document: its keys and list indexes, from the top.
KeyPath = tuple[str | int, ...]


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    """The schema as an operator gets it: what ``kafkaops inventory schema`` prints."""
    from kafkaops.cli.main import register

    result = CliRunner().invoke(register(), ["inventory", "schema"])
    assert result.exit_code == 0, result.output
    assert result.stdout == SHIPPED.read_text(encoding="utf-8")  # the shipped file, verbatim
    loaded: dict[str, Any] = json.loads(result.stdout)
    return loaded


@pytest.fixture(scope="module")
def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema)


def _site(dc: str) -> dict[str, Any]:
    doc = copy.deepcopy(FULL)
    doc["cluster"] = f"main-{dc}"
    for section in ("hosts", "controllers"):
        for host in doc[section].values():
            host["dc"] = dc
    return doc


def _write(directory: Path, doc: dict[str, Any], name: str = "inventory.yaml") -> Path:
    path = directory / name
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def sites_dir(tmp_path: Path) -> Path:
    """A directory holding the two sites SITES names."""
    for dc in ("eqiad", "codfw"):
        _write(tmp_path, _site(dc), f"{dc}.yaml")
    return tmp_path


def _check(directory: Path, doc: dict[str, Any]) -> list[str]:
    return [e.message for e in check_inventory(_write(directory, doc))]


# --- the schema itself ----------------------------------------------------------------------------------------


def test_the_schema_is_a_valid_2020_12_schema_editors_read_the_same(schema: dict[str, Any]) -> None:
    """Draft 2020-12, written with only the keywords a draft-07 reader (yaml-language-server, VS Code's YAML
    extension) reads the same way: no keyword newer than draft 07, no draft-07 keyword 2020-12 dropped."""
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft7Validator.check_schema(schema)
    newer_or_dropped = {"dependentRequired", "dependentSchemas", "prefixItems", "unevaluatedProperties",
                        "unevaluatedItems", "$dynamicRef", "$dynamicAnchor", "$anchor", "$recursiveRef",
                        "minContains", "maxContains", "dependencies", "definitions"}

    def keywords(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for key, value in node.items():
                yield key
                if key not in ("properties", "$defs"):
                    yield from keywords(value)
                else:  # names of properties and definitions are not keywords
                    for sub in value.values():
                        yield from keywords(sub)
        elif isinstance(node, list):
            for item in node:
                yield from keywords(item)

    assert not set(keywords(schema)) & newer_or_dropped


def test_the_fixed_values_are_the_readers(schema: dict[str, Any]) -> None:
    defs = schema["$defs"]
    for kind in ("cluster", "sites"):
        assert defs[kind]["properties"]["environment"]["anyOf"][0]["enum"] == list(ENVIRONMENTS)
    security = defs["kafkaSecurity"]["properties"]
    assert security["protocol"]["anyOf"][0]["enum"] == list(KAFKA_PROTOCOLS)
    assert security["sasl"]["properties"]["mechanism"]["anyOf"][0]["enum"] == list(SASL_MECHANISMS)
    assert list(defs["commands"]["properties"]) == list(REQUIRED_COMMANDS + OPTIONAL_COMMANDS)
    top_commands = defs["cluster"]["properties"]["commands"]["allOf"]
    assert {"required": list(REQUIRED_COMMANDS)} in top_commands


# --- what validates -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted((REPO / "inventory").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_inventory_validates(path: Path, validator: jsonschema.Draft202012Validator) -> None:
    assert check_inventory(path) == []  # the reader's verdict, which the schema must share
    data = yaml.safe_load(path.read_text())
    errors = [f"{e.json_path}: {e.message}" for e in validator.iter_errors(data)]
    assert errors == []
    assert jsonschema.Draft7Validator(validator.schema).is_valid(data)  # as an editor's draft-07 reading sees it


def test_the_complete_documents_validate_and_load(sites_dir: Path, validator: jsonschema.Draft202012Validator,
                                                  tmp_path: Path) -> None:
    assert _check(tmp_path, FULL) == [] and list(validator.iter_errors(FULL)) == []
    assert _check(sites_dir, SITES) == [] and list(validator.iter_errors(SITES)) == []


def test_an_inventory_init_draft_validates_once_filled_in(validator: jsonschema.Draft202012Validator) -> None:
    seen = SeenCluster((SeenBroker(1001, "kafka1001.eqiad.wmnet", 9092, "a"),
                        SeenBroker(1002, "kafka1002.eqiad.wmnet", 9092, None)),
                       controller=1001, zookeeper="conf1001.eqiad.wmnet:2181/kafka/main-eqiad")
    security = {"protocol": "SASL_SSL", "ca_file": CA,
                "sasl": {"mechanism": "SCRAM-SHA-512", "username": "kafkaops", "password_file": PASSWORD}}
    text = draft("main-eqiad", seen, security=security, asked="kafka1001.eqiad.wmnet:9092", when="on 2026-11-28")
    assert "`kafkaops inventory schema --help`" in text.split("\ncluster:")[0]  # the header says where
    data = yaml.safe_load(text)
    as_drafted = {e.message for e in validator.iter_errors(data)}  # what Kafka cannot know is missing, as check says
    assert any("'commands' is a required property" in m for m in as_drafted), as_drafted
    data["commands"] = dict.fromkeys(REQUIRED_COMMANDS, "true")
    for host in data["hosts"].values():
        host.update(dc="eqiad", rack=host.get("rack", "b"))
    assert list(validator.iter_errors(data)) == []


# --- the keys of every section are the reader's ---------------------------------------------------------------


def _mappings(node: Any, path: KeyPath = ()) -> Iterator[KeyPath]:
    """The path of every mapping in a document (the document itself first)."""
    if isinstance(node, dict):
        yield path
        for key, value in node.items():
            yield from _mappings(value, (*path, key))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _mappings(item, (*path, i))


def _key(path: KeyPath) -> str:
    """A path as the reader's errors write it: ``monitoring.gates[0].name``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _with(doc: dict[str, Any], path: KeyPath, key: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node: Any = out
    for part in path:
        node = node[part]
    node[key] = value
    return out


_UNKNOWN_KEY = re.compile(r"^\S+:\d+: (?P<key>\S+): unknown key \(allowed: (?P<allowed>[^)]*)\)$")
_UNKNOWN_COMMAND = re.compile(r"^\S+:\d+: (?P<key>\S+): unknown command template\(s\): (?P<names>.*?)( \(known|$)")


def _reader_keys(doc: dict[str, Any], path: KeyPath, directory: Path) -> set[str] | None:
    """The keys the reader accepts in the mapping at ``path`` of ``doc``; None if it takes any name there
    (hosts:, services:, checkpoints:, a host's conftool tags...).

    Asked of the reader: with an unknown key there, it either names the keys it allows (``unknown key
    (allowed: ...)``: every such list for that key, as a section read by two readers — deploy_host: — gives
    two), refuses it as a command template (whose names are its REQUIRED_COMMANDS and OPTIONAL_COMMANDS), or
    takes any name. Each allowed key ``doc`` lacks there is tried: a key only one of two lists names is
    refused by the other."""
    where = _key((*path, UNKNOWN))
    messages = [str(e) for e in check_inventory(_write(directory, _with(doc, path, UNKNOWN, 1)))]
    allowed: set[str] = set()
    for message in messages:
        if (m := _UNKNOWN_KEY.match(message)) and m["key"] == where:
            allowed |= {k.strip() for k in m["allowed"].split(",")}
        m = _UNKNOWN_COMMAND.match(message)
        if m and m["key"] == _key(path) and UNKNOWN in m["names"].split(", "):
            return set(REQUIRED_COMMANDS + OPTIONAL_COMMANDS)
    if not allowed:
        return None
    node: Any = doc
    for part in path:
        node = node[part]
    for key in sorted(allowed - set(node)):
        tried = [str(e) for e in check_inventory(_write(directory, _with(doc, path, key, "x")))]
        if any((m := _UNKNOWN_KEY.match(t)) and m["key"] == _key((*path, key)) for t in tried):
            allowed.discard(key)
    return allowed


def _parts(schema: dict[str, Any], node: dict[str, Any]) -> list[dict[str, Any]]:
    """``node`` and what it includes (its ``$ref``, its ``allOf``): where its properties are."""
    out = [node]
    if "$ref" in node:
        out += _parts(schema, schema["$defs"][node["$ref"].removeprefix("#/$defs/")])
    for sub in node.get("allOf", ()):
        out += _parts(schema, sub)
    return out


def _schema_keys(schema: dict[str, Any], root: str, path: KeyPath) -> set[str] | None:
    """The properties the schema allows at ``path`` of a document of kind ``root``; None if any name."""
    node = schema["$defs"][root]
    for part in path:
        parts = _parts(schema, node)
        if isinstance(part, int):
            node = next(p["items"] for p in parts if "items" in p)
            continue
        props = {k: v for p in parts for k, v in p.get("properties", {}).items()}
        node = props[part] if part in props else next(
            p["additionalProperties"] for p in parts if isinstance(p.get("additionalProperties"), dict))
    parts = _parts(schema, node)
    if not any(p.get("additionalProperties") is False for p in parts):
        return None
    return {k for p in parts for k in p.get("properties", {})}


def _drift(schema: dict[str, Any], doc: dict[str, Any], root: str, directory: Path) -> list[str]:
    drift = []
    for path in _mappings(doc):
        reader, ours = _reader_keys(doc, path, directory), _schema_keys(schema, root, path)
        if reader != ours:
            where = _key(path) or "(top)"
            if reader is None or ours is None:
                drift.append(f"{where}: the reader takes {'any key' if reader is None else sorted(reader)}, "
                             f"the schema {'any key' if ours is None else sorted(ours)}")
            else:
                drift.append(f"{where}: only the reader: {sorted(reader - ours)}, only the schema: "
                             f"{sorted(ours - reader)}")
    return drift


def test_every_sections_keys_are_the_readers(schema: dict[str, Any], tmp_path: Path, sites_dir: Path) -> None:
    """Section by section, the schema's properties (and whether it refuses other keys) are the reader's."""
    sections = list(_mappings(FULL)) + list(_mappings(SITES))
    assert len(sections) > 35  # every section of both kinds of inventory is asked about
    drift = _drift(schema, FULL, "cluster", tmp_path) + _drift(schema, SITES, "sites", sites_dir)
    assert drift == [], "\n".join(drift)


def test_the_drift_guard_sees_a_key_the_schema_lost(schema: dict[str, Any], tmp_path: Path) -> None:
    """The guard itself: a key removed from the schema (the reader still takes it) is reported, by section."""
    broken = copy.deepcopy(schema)
    del broken["$defs"]["ssh"]["properties"]["proxy_jump"]
    drift = _drift(broken, FULL, "cluster", tmp_path)
    assert "ssh: only the reader: ['proxy_jump'], only the schema: []" in drift, drift
    assert "hosts.kafka1001.ssh: only the reader: ['proxy_jump'], only the schema: []" in drift, drift


# --- what both refuse -----------------------------------------------------------------------------------------


def _set(path: KeyPath, value: Any) -> Callable[[dict[str, Any]], dict[str, Any]]:
    return lambda doc: _with(doc, path[:-1], str(path[-1]), value)


def _drop(path: KeyPath) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def change(doc: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(doc)
        node: Any = out
        for part in path[:-1]:
            node = node[part]
        del node[path[-1]]
        return out
    return change


#: (what, the change to FULL, words of the reader's error)
REFUSED = [
    ("unknown-top-level-key", _set(("flavour",), "vanilla"), "flavour: unknown key"),
    ("unknown-host-key", _set(("hosts", "kafka1001", "rakc"), "a"), "hosts.kafka1001.rakc: unknown key"),
    ("broker-id-not-an-integer", _set(("hosts", "kafka1001", "broker_id"), "x1001"), "expected an integer"),
    ("port-a-string", _set(("services", "eventbus", "port"), "8085"), "expected an integer"),
    ("ssh-port-a-boolean", _set(("ssh", "port"), True), "expected an integer"),
    ("active-a-string", _set(("services", "eventbus", "active"), "yes"), "expected true or false"),
    ("rack-a-list", _set(("hosts", "kafka1001", "rack"), ["a"]), "expected a string"),
    ("hosts-a-list", _set(("hosts",), ["kafka1001"]), "expected a mapping"),
    ("environment-unknown", _set(("environment",), "prod"), "expected one of production, lab"),
    ("protocol-unknown", _set(("kafka", "security", "protocol"), "TLS"), "unknown protocol"),
    ("password-inline", _set(("kafka", "security", "sasl", "password"), "hunter2"), "never written in an inventory"),
    ("unknown-command", _set(("commands", "kafka_restart"), "true"), "unknown command template(s): kafka_restart"),
    ("required-command-missing", _drop(("commands", "boot_id")), "missing command template(s): boot_id"),
    ("host-without-dc", _drop(("hosts", "kafka1001", "dc")), "hosts.kafka1001.dc: missing required key"),
    ("gate-without-threshold", lambda d: _with(d, ("monitoring",), "gates", [{"name": "g", "query": "q"}]),
     "has no threshold"),
]


@pytest.mark.parametrize(("change", "words"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_what_the_reader_refuses_the_schema_refuses(change: Callable[[dict[str, Any]], dict[str, Any]], words: str,
                                                    validator: jsonschema.Draft202012Validator,
                                                    tmp_path: Path) -> None:
    doc = change(FULL)
    errors = _check(tmp_path, doc)
    assert any(words in e for e in errors), errors
    assert not validator.is_valid(doc)
    assert not jsonschema.Draft7Validator(validator.schema).is_valid(doc)  # an editor's draft-07 reading too


def test_a_value_the_reader_reads_is_not_refused(validator: jsonschema.Draft202012Validator, tmp_path: Path) -> None:
    """Where the reader is lenient the schema is too: a protocol in lower case, a number for a text, ${VAR}
    where a fixed value goes (the reader checks it once expanded)."""
    doc = _set(("kafka", "security", "protocol"), "sasl_ssl")(FULL)
    doc = _set(("hosts", "kafka1001", "rack"), 3)(doc)
    doc = _set(("environment",), "${KAFKAOPS_SCHEMA_TEST_ENV:-production}")(doc)
    doc = _set(("kafka", "security", "ca_file"), "${KAFKAOPS_SCHEMA_TEST_DIR:-/etc/ssl}/ca.pem")(doc)
    assert _check(tmp_path, doc) == []
    assert list(validator.iter_errors(doc)) == []


# --- the command ----------------------------------------------------------------------------------------------


def test_the_help_says_how_to_point_an_editor_at_it() -> None:
    from kafkaops.cli.main import register

    result = CliRunner().invoke(register(), ["inventory", "schema", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "# yaml-language-server: $schema=inventory.schema.json" in result.stdout
    assert "kafkaops inventory schema > inventory.schema.json" in " ".join(result.stdout.split())


def test_the_product_never_imports_jsonschema() -> None:
    """jsonschema is a test dependency: the command prints the file, nothing in the package validates with it."""
    from import_walk import PACKAGE, imports

    found = [f"{path}:{i.line}" for path in sorted(PACKAGE.rglob("*.py")) for i in imports(path)
             if i.name.split(".")[0] == "jsonschema"]
    assert found == []
