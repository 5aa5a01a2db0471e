"""No value substituted into a command template can change the command (issue 11, finding 1)."""

from __future__ import annotations

import dataclasses
import shlex
import string
from pathlib import Path

import pytest

from kafkaops.errors import ConfigError
from kafkaops.inventory import load_inventory
from kafkaops.templates import check_repo, check_revision, check_template, render

REPO = Path(__file__).resolve().parents[2]
INVENTORIES = sorted((REPO / "inventory").glob("*.yaml"))

HOSTILE = [
    "x; id > /tmp/pwned",
    "$(touch /tmp/pwned)",
    "`touch /tmp/pwned`",
    "a' b",
    'a" b',
    "a\nrm -rf ~",
    "x && reboot",
    "x | sh",
    "x # comment",
    "*",
    "~",
    "",
]


def _templates() -> list[tuple[str, str, str]]:
    out = []
    for path in INVENTORIES:
        cluster = load_inventory(path)
        hosts = [*cluster.hosts, *([cluster.deploy_host] if cluster.deploy_host else [])]
        for host in hosts:
            for name, template in host.commands.items():
                out.append((path.name, name, template))
    return sorted(set(out))


def _fields(template: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(template) if f]


class _Obj:
    """Any object whose every attribute is ``value`` (stands for a Host, a Cluster...)."""

    def __init__(self, value: str) -> None:
        self._value = value

    def __getattr__(self, name: str) -> str:
        return self._value


def _values(template: str, hostile_field: str | None, hostile: str) -> dict[str, object]:
    values: dict[str, object] = {}
    for field in _fields(template):
        root = field.split(".", 1)[0].split("[", 1)[0]
        value = hostile if field == hostile_field else "benign"
        values[root] = _Obj(value) if "." in field else value
    return values


@pytest.mark.parametrize(("inventory", "name", "template"), _templates())
def test_every_placeholder_of_every_template_stays_one_literal_word(inventory: str, name: str, template: str) -> None:
    fields = _fields(template)
    benign = shlex.split(render(template, **_values(template, None, "")))
    for field in fields:
        for hostile in HOSTILE:
            rendered = render(template, **_values(template, field, hostile))
            words = shlex.split(rendered)
            assert len(words) == len(benign), (name, field, hostile, rendered)
            if hostile:
                assert sum(hostile in w for w in words) >= 1, (name, field, hostile, rendered)


def test_the_inventories_have_templates_with_placeholders() -> None:
    assert sum(1 for _, _, t in _templates() if _fields(t)) >= 10


@pytest.mark.parametrize("template", [
    'labdeploy --rev {rev} "{message}"',
    "tcpdump 'dst host {host.address}'",
    "echo \"before {x} after\"",
])
def test_a_template_quoting_its_own_placeholder_is_refused(template: str) -> None:
    problem = check_template("deploy", template)
    assert problem is not None and "inside its own quotes" in problem


@pytest.mark.parametrize(("name", "template"), [
    ("deploy", "labdeploy --rev {rev} {message}"),
    ("syn_capture", "tcpdump dst host {host.address} and dst port {port} and '(tcp[tcpflags] & tcp-syn) != 0'"),
    ("kafka_stop", "echo {{literal}} {host.fqdn}"),
    ("service_restart", "systemctl restart {service}.service"),
])
def test_bare_placeholders_and_quoted_literals_are_fine(name: str, template: str) -> None:
    assert check_template(name, template) is None


def test_an_inventory_whose_template_quotes_a_placeholder_fails_to_load_naming_the_line(tmp_path: Path) -> None:
    text = (REPO / "inventory" / "lab.yaml").read_text()
    bad = text.replace("deploy: labdeploy -l {host.fqdn} --rev {rev} -- {message}",
                       'deploy: labdeploy -l {host.fqdn} --rev {rev} -- "{message}"')
    assert bad != text
    path = tmp_path / "lab.yaml"
    path.write_text(bad)
    with pytest.raises(ConfigError, match=r"lab\.yaml:\d+: commands\.deploy: .*inside its own quotes"):
        load_inventory(path)


@pytest.mark.parametrize("rev", ["r1;id", "$(id)", "a b", "-rf", ".hidden", "", "x" * 65, "r1\n", "ré"])
def test_hostile_revisions_are_refused(rev: str) -> None:
    with pytest.raises(ConfigError, match="is not a revision"):
        check_revision(rev)


@pytest.mark.parametrize("rev", ["r1", "v1.2.3", "1a2b3c4d", "release_2024-01"])
def test_revisions(rev: str) -> None:
    assert check_revision(rev) == rev


@pytest.mark.parametrize("repo", ["../etc", "/etc", "a/../b", "a b", "a;b", "-x", "a//b"])
def test_hostile_repos_are_refused(repo: str) -> None:
    with pytest.raises(ConfigError, match="not a repository path"):
        check_repo(repo)


def test_the_deploy_command_refuses_a_hostile_rollback_revision() -> None:
    """On rollback the revision comes from the target's own HTTP reply: it is input, validated."""
    from kafkaops.environment import Environment
    from kafkaops.queries.deploy_host import deploy_command

    cluster = load_inventory(REPO / "inventory" / "lab.yaml")
    env = Environment(cluster, dry_run=True)
    target = dataclasses.replace(cluster.hosts[0])
    ok = deploy_command(env, target, rev="r2", message="it's \"fine\"; really", repo="eventlogging/eventbus")
    assert shlex.split(ok)[-1] == "it's \"fine\"; really"
    with pytest.raises(ConfigError, match="is not a revision"):
        deploy_command(env, target, rev="r1; rm -rf ~ #", message="m", repo="")


@pytest.mark.parametrize(("name", "template", "said"), [
    ("kafka_stop", "systemctl stop {nosuch}", "uses {nosuch}, which it is not given"),
    ("reboot", "echo {rev}", "uses {rev}, which it is not given"),
    ("kafka_stop", "x {host.__class__.__init__}", "only plain attributes"),
    ("kafka_stop", "x {host[0]}", "only plain attributes"),
])
def test_a_template_naming_what_it_is_not_given_is_refused_at_load(name: str, template: str, said: str) -> None:
    problem = check_template(name, template)
    assert problem is not None and said in problem
