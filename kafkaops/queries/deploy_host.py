"""The deploy host: its command templates, the deploy command for one target, and the rollback hint.

Shared by the deploy steps and by the service steps (a failed health check or log scan after a deploy
prints how to roll that target back), so it imports neither: no import circle.

A deploy message and revisions are pasted into a shell command on the deploy host; they are checked
here before any command is built.
"""

from __future__ import annotations

import re

from kafkaops.engine.context import RunContext
from kafkaops.environment import Environment
from kafkaops.errors import ConfigError
from kafkaops.facts.revision import parse_checked_out_revision
from kafkaops.model import Host
from kafkaops.templates import check_repo, check_revision, render

_HEX = re.compile(r"[0-9a-f]{7,40}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def revision_matches(served: str | None, wanted: str) -> bool:
    """Does ``served`` (what a target reports) name the revision ``wanted``?

    Exact match, ignoring case and surrounding blanks; git SHAs also match by prefix (at least 7 hex
    digits on both sides), so ``1a2b3c4`` matches ``1a2b3c4d5e...``. ``r1`` never matches ``r10``.
    """
    if not served or not wanted:
        return False
    s, w = served.strip().lower(), wanted.strip().lower()
    if s == w:
        return True
    if _HEX.fullmatch(s) and _HEX.fullmatch(w):
        return s.startswith(w) or w.startswith(s)
    return False


def check_message(message: str) -> str:
    """A deploy message: one line of text (it is shell-quoted like every value, and logged) that does not
    start with ``-``: quoting keeps it one word, but a program still reads a word starting with ``-`` as
    an option (``scap deploy -l HOST --force``) unless the template puts ``--`` before it."""
    if not message.strip():
        raise ConfigError("a deploy needs a message (it goes to the deploy log and SAL, like scap's)",
                          hint='pass --message "..."')
    if message.lstrip().startswith("-"):
        raise ConfigError(f"the deploy message {message[:40]!r} starts with '-', which the deploy tool could "
                          "read as an option", hint="start it with a word")
    if _CONTROL.search(message):
        raise ConfigError("the deploy message contains a control character (a newline, an escape...)",
                          hint="write it on one line")
    return message


def deploy_host(env: Environment) -> Host:
    host = env.cluster.deploy_host
    if host is None:
        raise ConfigError(f"cluster {env.cluster.name} has no deploy_host in {env.cluster.source}",
                          hint="add deploy_host: {name: ..., fqdn: ..., address: ...} to the inventory")
    return host


def _template(env: Environment, target: Host, name: str) -> str:
    d = deploy_host(env)
    template = d.commands.get(name) or target.commands.get(name)
    if not template:
        raise ConfigError(f"no '{name}' command template for the deploy host {d.name} in {env.cluster.source}",
                          hint=f"add commands.{name} to the inventory")
    return template


def ships_rev(env: Environment, target: Host) -> bool:
    """Does the deploy template take the revision (``{rev}``), or ship the deploy host's checkout (scap)?"""
    return "{rev}" in _template(env, target, "deploy")


def deploy_command(env: Environment, target: Host, *, rev: str, message: str, repo: str) -> str:
    """The inventory's deploy command for ``target`` (run on the deploy host). The revision and the
    repository are validated (the revision may come from a target's own HTTP reply, on rollback), and
    every value is shell-quoted: none of them can change the command."""
    check_revision(rev)
    check_repo(repo)
    return render(_template(env, target, "deploy"), host=target, cluster=env.cluster, deploy_host=deploy_host(env),
                  rev=rev, message=check_message(message), repo=repo)


def checked_out_revision(env: Environment, repo: str) -> str:
    """What the deploy host would ship (``deploy_revision`` template, e.g. ``git rev-parse --short HEAD``):
    one revision, validated, since it is pasted into the deploy command later."""
    d = deploy_host(env)
    cmd = env.command(d, "deploy_revision", repo=repo)
    return parse_checked_out_revision(env.run(d, cmd, timeout=30).stdout, host=d.name, command=cmd).value


def deploy_before_key(host: Host, service: str) -> str:
    return f"deploy_before/{host.name}/{service}"


def rollback_hint(env: Environment, ctx: RunContext, host: Host, service: str) -> str:
    """How to roll ``host`` back, if this run deployed to it: the kafkaops command and the raw one."""
    run_id = ctx.run_id
    if not run_id:
        return ""
    before = ctx.facts.get(deploy_before_key(host, service))
    if not before or not before.get("rev"):
        return ""
    prev, repo = before["rev"], before.get("repo", "")
    raw = deploy_command(env, host, rev=prev, message=f"rollback to {prev}", repo=repo)
    checkout = "" if ships_rev(env, host) else f"check out {prev} on {deploy_host(env).name}, then "
    return (f"Roll back: `kafkaops runs abort {run_id} --rollback --reason \"bad deploy of {before.get('to')}\"` "
            f"redeploys {prev} to {host.name}, checks it and repools it; by hand: {checkout}on "
            f"{deploy_host(env).name}: {raw}")
