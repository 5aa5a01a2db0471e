"""MirrorMaker 2's progress from its Connect offsets topic (kafkaops.facts.mirror), and the lab's config."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkaops.facts.errors import MalformedAnswer
from kafkaops.facts.mirror import lag_of, offsets_topic, parse_offsets_records
from kafkaops_lab.dirs import lab_dir_env

# Records as MirrorMaker 3.9 wrote them to mm2-offsets.eqiad.internal on codfw (the lab, November 2026).
KEY0 = b'["MirrorSourceConnector",{"cluster":"eqiad","partition":0,"topic":"eqiad.test.event"}]'
KEY1 = b'["MirrorSourceConnector",{"cluster":"eqiad","partition":1,"topic":"eqiad.test.event"}]'


def test_the_newest_record_per_partition_wins_and_is_the_last_mirrored_offset() -> None:
    got = parse_offsets_records([(KEY0, b'{"offset":3}'), (KEY1, b'{"offset":0}'), (KEY0, b'{"offset":8}')], "eqiad")
    assert got[("eqiad.test.event", 0)].last_offset == 8
    assert got[("eqiad.test.event", 0)].next_offset == 9
    assert got[("eqiad.test.event", 1)].next_offset == 1


def test_tombstones_other_connectors_and_other_clusters_are_not_progress() -> None:
    other = b'["MirrorCheckpointConnector",{"cluster":"eqiad","partition":0,"topic":"x"}]'
    foreign = b'["MirrorSourceConnector",{"cluster":"codfw","partition":0,"topic":"codfw.test.event"}]'
    got = parse_offsets_records([(KEY0, b'{"offset":3}'), (KEY0, None), (other, b'{"offset":9}'),
                                 (foreign, b'{"offset":9}')], "eqiad")
    assert got == {}


@pytest.mark.parametrize("key,value", [
    (None, b'{"offset":1}'),
    (b"not json", b'{"offset":1}'),
    (b'{"cluster":"eqiad"}', b'{"offset":1}'),
    (b'["MirrorSourceConnector",{"cluster":"eqiad","partition":"0","topic":"t"}]', b'{"offset":1}'),
    (KEY0, b"garbage"),
    (KEY0, b'{"offset":"8"}'),
    (KEY0, b'{"offset":true}'),
    (KEY0, b'{"offset":-5}'),
    (KEY0, b'{}'),
])
def test_a_record_not_understood_stops_rather_than_reads_as_caught_up(key: bytes | None, value: bytes) -> None:
    with pytest.raises(MalformedAnswer, match=offsets_topic("eqiad")):
        parse_offsets_records([(key, value)], "eqiad")


def test_lag_is_the_log_end_minus_the_mirrored_position_never_below_the_log_start() -> None:
    mirrored = parse_offsets_records([(KEY0, b'{"offset":8}')], "eqiad")
    lags = lag_of({("eqiad.test.event", 0): (0, 12), ("eqiad.test.event", 1): (5, 9),
                   ("eqiad.test.event", 2): (0, 0)}, mirrored)
    assert [(p.partition, p.lag) for p in lags] == [(0, 3), (1, 4), (2, 0)]


def test_an_unreadable_source_partition_is_an_error() -> None:
    with pytest.raises(MalformedAnswer):
        lag_of({("eqiad.test.event", 0): (None, 12)}, {})


@pytest.fixture
def site_secrets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, str]:
    """Each site's lab directory holding its CA and its users' 0600 password files, as ``lab up`` writes
    them; the brokers' passwords, by site."""
    passwords = {}
    for site in ("lab-eqiad", "lab-codfw"):
        base = tmp_path / site
        (base / "tls").mkdir(parents=True)
        (base / "tls" / "ca.pem").write_text(Path("/etc/ssl/certs/ca-certificates.crt").read_text())
        (base / "secrets").mkdir(mode=0o700)
        for user in ("kafkaops", "broker"):
            secret = base / "secrets" / f"{user}.password"
            secret.write_text(f"{site}-{user}-password-0123456789\n")
            secret.chmod(0o600)
        passwords[site] = f"{site}-broker-password-0123456789"
        monkeypatch.setenv(lab_dir_env(site), str(base))
    monkeypatch.setenv(lab_dir_env("lab-sites"), str(tmp_path / "lab-sites"))
    return passwords


def test_the_lab_mirrors_each_sites_prefix_flushing_per_target(site_secrets: dict[str, str]) -> None:
    from kafkaops.inventory import load_inventory
    from kafkaops_lab.sites import mirror_properties

    text = mirror_properties(load_inventory(Path(__file__).resolve().parents[2] / "inventory" / "lab-sites.yaml"))
    lines = set(text.splitlines())
    # A properties file unescapes one backslash: two reach MirrorMaker as the regex eqiad\..* (a literal dot).
    assert "eqiad->codfw.topics = eqiad\\\\..*" in lines and "codfw->eqiad.topics = codfw\\\\..*" in lines
    # A bare offset.flush.interval.ms is ignored (stays 60 s): only the target-prefixed form counts.
    assert {"eqiad.offset.flush.interval.ms = 1000", "codfw.offset.flush.interval.ms = 1000"} <= lines
    assert "replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy" in lines
    assert "sync.group.offsets.enabled = false" in lines


def test_mirrormaker_reaches_secured_sites_with_their_passwords_by_reference(site_secrets: dict[str, str]) -> None:
    """Each site over SASL_SSL as its super user, trusting its own CA; the passwords only in the 0600 secrets
    file, named by reference: MirrorMaker stores its connectors' configs in a topic of each site."""
    from kafkaops.inventory import load_inventory
    from kafkaops_lab.sites import mirror_properties, mirror_secret_properties, mirror_secrets

    sites = load_inventory(Path(__file__).resolve().parents[2] / "inventory" / "lab-sites.yaml")
    text, secrets = mirror_properties(sites), mirror_secret_properties(sites)
    assert not any(password in text for password in site_secrets.values())
    for dc, site in (("eqiad", "lab-eqiad"), ("codfw", "lab-codfw")):
        assert f"{dc}.security.protocol=SASL_SSL" in text
        assert f"{dc}.ssl.truststore.location={sites.site(dc).kafka_security.ca_file}" in text
        assert f"{dc}.sasl.jaas.config=${{file:{mirror_secrets(sites)}:{dc}.sasl.jaas.config}}" in text
        assert f'username="broker" password="{site_secrets[site]}"' in secrets
    assert "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider" in text
