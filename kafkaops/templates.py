"""Command templates from the inventory, rendered so that no value can change the command.

The inventory says how a site does things (``sudo -n systemctl stop kafka``, ``scap deploy -l
{host.fqdn} {message}``); kafkaops fills in the placeholders. Those values come from operators (a deploy
message, a revision), from the inventory itself, and — on rollback — from a target host's own HTTP reply.
Pasted into a shell verbatim, ``--rev 'r1;id>pwned'`` or a reply of ``x; rm -rf ~ #`` would run on the
deploy host. So:

* every substituted value is ``shlex.quote``d (:func:`render`): it reaches the remote shell as one
  literal word, whatever it contains;
* a template that puts a placeholder inside its own quotes (``"{message}"``) is refused when the
  inventory loads (:func:`check_template`): quoting is kafkaops' job, and a value inside someone else's
  quotes is exactly where the escape happens;
* values with a shape (revisions, repositories) are validated against strict patterns first
  (:func:`check_revision`, :func:`check_repo`), so a malformed one is an error before any command exists.
"""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Mapping
from typing import Any

from kafkaops.errors import ConfigError

#: A revision: git sha, tag or branch-like name (``r1``, ``v1.2.3``, ``1a2b3c4``).
REVISION = re.compile(r"[0-9A-Za-z][0-9A-Za-z._-]{0,63}")
#: A repository path on the deploy host (``eventlogging/eventbus``): no ``..``, no leading ``/`` or ``-``.
REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*")


class _Quoting(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        return shlex.quote(format(value, format_spec))


_QUOTING = _Quoting()


def render(template: str, **values: Any) -> str:
    """``template`` with every placeholder replaced by its value, shell-quoted (attribute access such as
    ``{host.fqdn}`` works as with ``str.format``).

    Raises:
        ConfigError: A placeholder names a value the template cannot have.
    """
    try:
        return _QUOTING.format(template, **values)
    except (KeyError, AttributeError, IndexError) as exc:
        raise ConfigError(f"command template {template!r} uses an unknown placeholder: {exc}",
                          hint="placeholders: " + ", ".join(sorted(values))) from exc


def placeholders(template: str) -> set[str]:
    """The root names ``template`` uses (``{host.fqdn}`` → ``host``); empty for a malformed one."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    except ValueError:
        return set()
    return {re.split(r"[.\[]", f, maxsplit=1)[0] for f in fields}


def placeholders_in_quotes(template: str) -> list[str]:
    """Placeholders that stand inside quotes the template wrote itself (``'dst host {host.address}'``)."""
    out, quote, i = [], "", 0
    while i < len(template):
        c = template[i]
        if c == "\\" and quote != "'":
            i += 2
            continue
        if quote:
            if c == quote:
                quote = ""
            elif c == "{" and template[i:i + 2] != "{{":
                end = template.find("}", i)
                out.append(template[i:end + 1] if end > 0 else template[i:])
            elif c == "{":
                i += 1
        elif c in "'\"":
            quote = c
        elif c == "{" and template[i:i + 2] == "{{":
            i += 1
        i += 1
    return out


#: The values each command template may use besides ``{host.…}`` and ``{cluster.…}``: a template naming
#: anything else fails when the inventory loads, not when a rollback first renders it.
PLACEHOLDERS: dict[str, frozenset[str]] = {
    "service_restart": frozenset({"service"}), "service_status": frozenset({"service"}),
    "service_pid": frozenset({"service"}), "service_log": frozenset({"service", "since"}),
    "syn_capture": frozenset({"port", "window", "vip"}),
    "vip_syn_capture": frozenset({"port", "window", "vip"}),
    "kafka_log": frozenset({"since"}), "failed_events_read": frozenset({"path"}),
    "deploy": frozenset({"rev", "message", "repo", "deploy_host"}), "deploy_revision": frozenset({"repo"}),
    "kafka_configure": frozenset({"phase"}), "kafka_format": frozenset({"cluster_id"}),
    "kafka_install": frozenset({"version"}), "kafka_cluster": frozenset({"subcommand"}),
}
_ALWAYS = frozenset({"host", "cluster"})


def check_template(name: str, template: str) -> str | None:
    """Why ``template`` is unsafe or wrong, or None. Placeholders must stand outside quotes (kafkaops
    quotes them) and name values this template is given; no private attributes."""
    inside = placeholders_in_quotes(template)
    if inside:
        return (f"command template {name!r} puts {', '.join(inside)} inside its own quotes; write the "
                "placeholder bare (kafkaops shell-quotes every value)")
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        return f"command template {name!r} is malformed: {exc} (write {{{{ and }}}} for literal braces)"
    allowed = _ALWAYS | PLACEHOLDERS.get(name, frozenset())
    for field in fields:
        root = re.split(r"[.\[]", field, maxsplit=1)[0]
        if root not in allowed:
            return (f"command template {name!r} uses {{{field}}}, which it is not given "
                    f"(it may use: {', '.join('{' + a + '}' for a in sorted(allowed))})")
        if "._" in field or "[" in field or field.startswith("_"):
            return f"command template {name!r} uses {{{field}}}: only plain attributes such as {{host.fqdn}}"
    return None


def check_revision(rev: str, *, what: str = "revision") -> str:
    """``rev`` if it looks like a revision; else a ConfigError saying what is allowed."""
    if not isinstance(rev, str) or not REVISION.fullmatch(rev):
        raise ConfigError(f"{what} {rev!r} is not a revision",
                          hint="a git sha, tag or name: letters, digits, '.', '_' and '-', at most 64")
    return rev


def check_repo(repo: str) -> str:
    """``repo`` if it looks like a repository path on the deploy host."""
    if repo == "" or (isinstance(repo, str) and REPO.fullmatch(repo) and ".." not in repo.split("/")):
        return repo
    raise ConfigError(f"repository {repo!r} is not a repository path",
                      hint="e.g. eventlogging/eventbus: letters, digits, '.', '_', '-' and '/' between parts")


def check_values(values: Mapping[str, Any]) -> None:
    """Validate the values that have a known shape before they reach any template."""
    if "rev" in values and values["rev"] not in (None, ""):
        check_revision(str(values["rev"]))
    if "repo" in values:
        check_repo(str(values["repo"]))
