"""The maintainers' command line: ``python -m bot COMMAND`` (or the ``bot`` script).

Library first: every command parses its options, calls a function in ``bot/``
and prints what happened. Each command's docstring is its ``--help``.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path
from typing import Optional

import click

from bot import paths


def _fail(message: str) -> None:
    raise click.ClickException(message)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Maintain the trauma-bond support bot: build, train, run, evaluate.

    Run from the repository root. Example: python -m bot train
    """


@cli.command()
def build() -> None:
    """Build what the bot needs from the project's data files.

    Builds the English spaCy pipeline (models/spacy-en) and regenerates the
    Rasa responses and rules from data/content and data/hotlines
    (domain/answers.yml, domain/crisis.yml, data/rules/answers.yml).

    Example: python -m bot build
    """
    from bot.build import write_generated
    from bot.language import ensure_english_pipeline

    click.echo(f"spaCy pipeline: {ensure_english_pipeline()}")
    changed = write_generated()
    for path in changed:
        click.echo(f"regenerated {path.relative_to(paths.project_dir())}")
    if not changed:
        click.echo("generated files are up to date")


@cli.command()
def check() -> None:
    """Check the content: quotes still in their articles, every topic answered.

    Also checks the hotline directory and that the generated Rasa files match
    their sources. Exits non-zero and lists the problems if any.

    Example: python -m bot check
    """
    from bot.build import stale_files
    from bot.content import ContentStore
    from bot.hotlines import directory_problems, load_regions

    problems = ContentStore.load().problems() + directory_problems(load_regions())
    problems += [f"{p.relative_to(paths.project_dir())} is out of date: run python -m bot build" for p in stale_files()]
    for problem in problems:
        click.echo(f"- {problem}", err=True)
    if problems:
        _fail(f"{len(problems)} problem(s) in the content")
    click.echo("content, hotlines and generated files are sound")


@cli.command()
@click.option("--force", is_flag=True, help="Train even if a model for the current data exists.")
def train(force: bool) -> None:
    """Train a model (only if the data changed since the last one).

    The model is written to models/ and named by date and data hash.

    Example: python -m bot train
    """
    from bot.training import ensure_model, train as train_model

    model = train_model() if force else ensure_model()
    click.echo(str(model))


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--model", "model_path", type=click.Path(exists=True, dir_okay=False), help="Model to serve.")
def run(host: str, model_path: Optional[str]) -> None:
    """Start the bot: action server (5055), Rasa server (5005), web app (8080).

    Trains first if the data changed. Stops everything on Ctrl-C.

    Example: python -m bot run
    """
    from bot.build import write_generated
    from bot.language import ensure_english_pipeline
    from bot.server import actions_service, rasa_service, web_service
    from bot.training import ensure_model

    ensure_english_pipeline()
    write_generated()
    model = Path(model_path) if model_path else ensure_model()
    services = [actions_service(), rasa_service(model, host=host), web_service(host=host)]
    for service in services:
        click.echo(f"starting {service.name} ...")
        service.start()
    try:
        for service in services:
            service.wait_ready()
            click.echo(f"{service.name} is up ({service.health_url})")
        click.echo(
            "\nDemo page with the chat widget: http://127.0.0.1:8080/\n"
            "Chat over REST:\n  curl -XPOST http://127.0.0.1:5005/webhooks/rest/webhook "
            "-d '{\"sender\":\"a\",\"message\":\"why do i miss him\"}'\n"
            f"Logs: {paths.var_dir() / 'logs'}\nPress Ctrl-C to stop."
        )
        while all(s.process and s.process.poll() is None for s in services):
            time.sleep(1)
        _fail("a service stopped; see its log in var/logs")
    except KeyboardInterrupt:
        click.echo("stopping ...")
    finally:
        for service in reversed(services):
            service.stop()


@cli.command(name="eval")
@click.option(
    "--cases",
    "cases_path",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Evaluation file (default: ../shared/eval/dev_cases.yml, else tests/data/dev_cases.yml).",
)
@click.option("--url", default="http://127.0.0.1:5005/webhooks/rest/webhook", show_default=True)
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Also write the report as JSON.")
@click.option("--concurrency", default=4, show_default=True)
def eval_command(cases_path: Optional[str], url: str, json_path: Optional[str], concurrency: int) -> None:
    """Score the bot on evaluation cases through its REST channel.

    Each case is the first message of a fresh conversation. If no server
    answers at URL, a temporary one is started with the current model.

    Example: python -m bot eval --cases ../shared/eval/dev_cases.yml
    """
    from bot.evaluate import evaluate, format_report, report_json
    from bot.server import actions_service, is_up, rasa_service
    from bot.training import ensure_model

    path = Path(cases_path) if cases_path else default_cases()
    services = []
    if not is_up(url.rsplit("/", 1)[0] + "/"):
        model = ensure_model()
        click.echo(f"no server at {url}: starting one with {model.name} ...")
        services = [actions_service(), rasa_service(model)]
        for service in services:
            service.start()
        for service in services:
            service.wait_ready()
    try:
        click.echo(f"evaluating {path} ...")
        report = evaluate(path, url=url, concurrency=concurrency)
    finally:
        for service in reversed(services):
            service.stop()
    click.echo(format_report(report, title=f"Evaluation of {path}"))
    if json_path:
        Path(json_path).write_text(report_json(report), encoding="utf-8")


@cli.command()
@click.option("--model", "model_path", type=click.Path(exists=True, dir_okay=False), help="Model to test.")
def stories(model_path: Optional[str]) -> None:
    """Run the test stories (tests/stories) and fail on any prediction error.

    Every topic, the disclaimer rules and the crisis paths are covered.
    Results go to var/results.

    Example: python -m bot stories
    """
    import subprocess

    from bot.training import ensure_model

    model = Path(model_path) if model_path else ensure_model()
    command = [
        sys.executable, "-m", "rasa", "test", "core",
        "--model", str(model),
        "--stories", str(paths.project_dir() / "tests" / "stories"),
        "--out", str(paths.var_dir() / "results"),
        "--fail-on-prediction-errors",
        "--no-plot",
    ]
    result = subprocess.run(command, cwd=str(paths.project_dir()))
    if result.returncode != 0:
        _fail(f"test stories failed: see {paths.var_dir() / 'results' / 'failed_test_stories.yml'}")
    click.echo("all test stories passed")


@cli.command()
@click.option("--days", type=float, default=None, help="Keep this many days (default: BOT_RETENTION_DAYS or 30).")
def purge(days: Optional[float]) -> None:
    """Delete conversations older than the retention period.

    A running server also does this once a day.

    Example: python -m bot purge --days 30
    """
    from bot.storage import db, retention

    db.migrate()
    deleted = retention.purge(days)
    click.echo(f"deleted {deleted} conversation(s) older than {retention.configured_days(days):g} days from {db.describe(db.database_url())}")


@cli.command(name="db-upgrade")
def db_upgrade() -> None:
    """Create or migrate the database schema (Alembic upgrade head).

    Uses BOT_DB_URL (a SQLAlchemy URL) or the SQLite file var/bot.db.

    Example: BOT_DB_URL=postgresql://bot:secret@127.0.0.1/bot python -m bot db-upgrade
    """
    from bot.storage import db

    db.migrate()
    click.echo(f"schema up to date: {db.describe(db.database_url())}")


@cli.group()
def users() -> None:
    """Manage the accounts of the review pages (advocates and maintainers)."""


@users.command(name="add")
@click.argument("name")
@click.option("--role", type=click.Choice(["advocate", "maintainer"]), required=True, help="What the account may do.")
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input (for scripts).")
def users_add(name: str, role: str, password_stdin: bool) -> None:
    """Create an account; asks for its password (12 characters or more).

    Example: python -m bot users add ana --role advocate
    """
    from bot.accounts import AccountError, add_user

    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    try:
        user = add_user(name, role, password)
    except AccountError as exc:
        _fail(str(exc))
    click.echo(f"created {user.role} {user.name}")


@users.command(name="list")
def users_list() -> None:
    """List the accounts.

    Example: python -m bot users list
    """
    from bot.accounts import list_users

    for user in list_users():
        click.echo(f"{user.name}\t{user.role}")


@users.command(name="remove")
@click.argument("name")
def users_remove(name: str) -> None:
    """Delete an account.

    Example: python -m bot users remove ana
    """
    from bot.accounts import remove_user

    if not remove_user(name):
        _fail(f"no user named {name!r}")
    click.echo(f"removed {name}")


@cli.command()
@click.option("--out", "out_path", type=click.Path(dir_okay=False), required=True, help="The HTML file to write.")
def flowbook(out_path: str) -> None:
    """Write the flow book (what the bot says in every situation) as one HTML file.

    The same pages as /review/flows, self-contained, to review offline or print.

    Example: python -m bot flowbook --out flowbook.html
    """
    import time as _time

    from bot.web import create_app
    from bot.flowbook import build_flowbook, rules_diagram

    app = create_app()
    with app.app_context(), app.test_request_context():
        from flask import render_template

        css = (Path(app.static_folder) / "review.css").read_text(encoding="utf-8")
        book = build_flowbook()
        html = render_template(
            "flowbook/standalone.html",
            book=book,
            diagram=rules_diagram(book.rules),
            css=css,
            generated=_time.strftime("%Y-%m-%d %H:%M UTC", _time.gmtime()),
            standalone=True,
        )
    Path(out_path).write_text(html, encoding="utf-8")
    click.echo(f"wrote {out_path} ({len(html) // 1024} KB, {len(book.topics)} topics, {len(book.crisis)} crisis categories)")


@cli.group()
def reviews() -> None:
    """Use the advocates' annotations (from /review)."""


@reviews.command(name="export")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="File to write (default: standard output).")
@click.option("--format", "fmt", type=click.Choice(["csv", "yaml"]), default="csv", show_default=True)
@click.option("--include-right", is_flag=True, help="Also export turns marked right (with the intent the bot chose).")
def reviews_export(out_path: Optional[str], fmt: str, include_right: bool) -> None:
    """Export annotated turns as example phrases (intent, text) for retraining.

    "Wrong topic" turns get the topic the advocate picked, "should have been a
    crisis handoff" turns the crisis intent. The file can be given to
    python -m bot phrases import.

    Example: python -m bot reviews export --out reviewed.csv
    """
    from bot.reviews import corrections, to_csv, to_yaml

    rows = corrections(include_right=include_right)
    text = to_csv(rows) if fmt == "csv" else to_yaml(rows)
    if out_path:
        Path(out_path).write_text(text, encoding="utf-8")
        click.echo(f"exported {len(rows)} phrase(s) to {out_path}", err=True)
    else:
        click.echo(text, nl=False)


def default_cases() -> Path:
    shared = paths.project_dir().parent / "shared" / "eval" / "dev_cases.yml"
    return shared if shared.exists() else paths.project_dir() / "tests" / "data" / "dev_cases.yml"


def main() -> None:
    cli(prog_name="python -m bot")


if __name__ == "__main__":
    main()
