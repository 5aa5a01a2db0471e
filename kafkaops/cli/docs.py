"""``kafkaops docs [TOPIC]``: the operator's documentation, as installed with kafkaops.

An admin host has the wheel, not the checkout: a hint that says "see docs/security.md" names a file the
operator does not have. The wheel ships ``docs/*.md`` (setup.py copies them into ``kafkaops/docs/``), and
every hint names a topic of this command instead (``kafkaops docs security``), which prints that file
wherever kafkaops is installed. Without a topic it lists them: one line each, its name and its title.

Plain text when stdout is not a terminal (a pager, a grep, a file); rendered Markdown on a terminal.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from kafkaops.cli.common import CommandLineError


def topics() -> dict[str, Path]:
    """Topic name -> its file: every ``*.md`` of the shipped docs (:func:`kafkaops.places.shipped_docs`)."""
    from kafkaops.places import shipped_docs

    return {p.stem: p for p in sorted(shipped_docs().glob("*.md"))}


def title(path: Path) -> str:
    """A doc's title: its first ``# `` heading (its name when it has none)."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("# "):
                return line[2:].strip()
    return path.stem


def docs(topic: str | None = typer.Argument(None, metavar="[TOPIC]",
                                            help="A topic from the list (without it: the list).")) -> None:
    """The documentation installed with kafkaops: the topics (name and title), or one topic's text.

    Unknown topic: one line naming the known ones, exit 2 (a usage error).
    """
    found = topics()
    if topic is None:
        width = max((len(name) for name in found), default=0)
        for name, path in found.items():
            typer.echo(f"{name:<{width}}  {title(path)}")
        return
    chosen = found.get(topic.removesuffix(".md"))
    if chosen is None:
        raise CommandLineError(f"no documentation topic {topic!r}; topics: {', '.join(found) or 'none installed'}")
    text = chosen.read_text(encoding="utf-8")
    if sys.stdout.isatty():
        from rich.markdown import Markdown

        from kafkaops.cli.common import console

        console.print(Markdown(text))
    else:
        typer.echo(text, nl=not text.endswith("\n"))


def register(root: typer.Typer) -> None:
    root.command("docs")(docs)
