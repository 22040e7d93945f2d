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
from typing import Any, Optional

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

    Builds the English spaCy pipeline (models/spacy-en) and the sentence
    encoder's ONNX graph (models/encoder), and regenerates the Rasa responses
    and rules from data/content and data/hotlines (domain/answers.yml,
    domain/crisis.yml, data/rules/answers.yml).

    Example: python -m bot build
    """
    from bot.build import write_generated
    from bot.language import ensure_english_pipeline
    from bot.nlu.encoder_graph import ensure_graph

    click.echo(f"spaCy pipeline: {ensure_english_pipeline()}")
    click.echo(f"sentence encoder: {ensure_graph()}")
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
@click.option("--finetune", is_flag=True, help="Start from the live model (only example phrases may have changed): faster.")
@click.option("--skip-validation", is_flag=True, help="Do not run rasa data validate and the content checks first.")
def train(force: bool, finetune: bool, skip_validation: bool) -> None:
    """Validate the data, then train a model named by date and data hash.

    Does nothing if a model for the current data exists (unless --force).
    With --finetune, starts from the live model when only phrases changed,
    so a small change retrains fast.

    Example: python -m bot train --finetune
    """
    from bot import registry
    from bot.training import FinetuneRefused, data_fingerprint, models_for, train as train_model
    from bot.without_tensorflow import install_for_config

    # The pipeline needs no TensorFlow: not importing it saves seconds of every training.
    install_for_config(paths.project_dir() / "config.yml")
    if not force:
        existing = models_for(data_fingerprint())
        if existing:
            click.echo(f"a model for the current data exists: {existing[0]} (use --force to train again)")
            return
    checked = None
    if not skip_validation:
        click.echo("1/2 validating the data ...")
        checked = validate_data()
    base = None
    if finetune:
        base = registry.serving_model()
        if base is None:
            _fail("nothing to finetune: no model yet; train without --finetune")
    click.echo("2/2 training ...")
    try:
        model = train_model(finetune_from=base, log=click.echo, importer=checked)
    except FinetuneRefused as exc:
        _fail(str(exc))
    click.echo(str(model))


def validate_data() -> Any:
    """rasa data validate (warnings fail) and the project's own checks; exits on failure.

    Returns the data Rasa read (its importer), for the training to reuse.
    """
    from bot.build import stale_files
    from bot.data_validation import validate_with_rasa
    from bot.content import ContentStore
    from bot.hotlines import directory_problems, load_regions

    problems = ContentStore.load().problems() + directory_problems(load_regions())
    problems += [f"{p.name} is out of date: run python -m bot build" for p in stale_files()]
    for problem in problems:
        click.echo(f"- {problem}", err=True)
    if problems:
        _fail("the content checks failed")
    checked = validate_with_rasa(paths.project_dir())
    for problem in checked.problems[-20:]:
        click.echo(f"- {problem}", err=True)
    if checked.problems:
        _fail("rasa data validate failed")
    return checked.importer


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--model", "model_path", type=click.Path(exists=True, dir_okay=False), help="Model to serve.")
def run(host: str, model_path: Optional[str]) -> None:
    """Start the bot: action server (5055), Rasa server (5005), web app (8080).

    Serves the live model (see promote). On a fresh clone it trains the first
    model and makes it live. Stops everything on Ctrl-C.

    Example: python -m bot run
    """
    from bot import registry
    from bot.build import write_generated
    from bot.language import ensure_english_pipeline
    from bot.server import actions_service, rasa_service, web_service
    from bot.training import ensure_model

    ensure_english_pipeline()
    write_generated()
    if model_path:
        model = Path(model_path)
    else:
        current = ensure_model(log=click.echo)
        live = registry.live_model()
        if live is None:
            registry.record_promotion(current, reason="first model (make run)")
            model = current
        else:
            model = live
            if live != current:
                click.echo(f"note: serving the live model {live.name}; {current.name} has the current data. "
                           "Check and ship it with: python -m bot evaluate && python -m bot promote")
    services = [actions_service(), rasa_service(model, host=host), web_service(host=host)]

    def stop_on_sigterm(signum: int, frame: Any) -> None:  # docker stop, systemd, kill: stop the children too
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop_on_sigterm)
    for service in services:
        click.echo(f"starting {service.name} ...")
        service.start()
    try:
        for service in services:
            service.wait_ready()
            click.echo(f"{service.name} is up ({service.health_url})")
        click.echo(
            "\nDemo page with the chat widget: http://127.0.0.1:8080/\n"
            "Review pages: http://127.0.0.1:8080/review/ (accounts: python -m bot users add NAME --role advocate)\n"
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


@cli.group()
def phrases() -> None:
    """Add example phrases to the training data (then: train, evaluate, promote)."""


def _print_phrase_report(report: "Any") -> None:
    for intent, text in report.added:
        click.echo(f"added to {intent}: {text}")
    for text, source, target in report.moved:
        click.echo(f"moved from {source} to {target}: {text}")
    for intent, text in report.duplicates:
        click.echo(f"skipped (already an example of {intent}): {text}")
    for text, reason in report.refused:
        click.echo(f"refused: {text!r}: {reason}", err=True)
    click.echo(f"{len(report.added)} added, {len(report.duplicates)} duplicates skipped, {len(report.refused)} refused")


@phrases.command(name="add")
@click.option("--intent", required=True, help="The intent (topic id, crisis, affirm, ...).")
@click.option("--force", is_flag=True, help="Move phrases from another intent; add danger phrases to a non-crisis intent.")
@click.argument("texts", nargs=-1, required=True)
def phrases_add(intent: str, force: bool, texts: tuple) -> None:
    """Add example phrases to an intent (data/nlu/INTENT.yml).

    Whitespace is normalised and duplicates skipped. Refused: an unknown
    intent, a phrase of another intent, a danger phrase for a non-crisis
    intent (unless --force). Exits non-zero if anything was refused.

    Example: python -m bot phrases add --intent why_miss "why cant i stop thinking about her"
    """
    from bot.phrases import PhraseError, add_phrases

    try:
        report = add_phrases(intent, texts, force=force)
    except PhraseError as exc:
        _fail(str(exc))
    _print_phrase_report(report)
    if report.refused:
        raise SystemExit(1)


@phrases.command(name="import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--force", is_flag=True, help="Move phrases from another intent; add danger phrases to a non-crisis intent.")
def phrases_import(file: str, force: bool) -> None:
    """Import phrases from a CSV or YAML file with intent and text columns.

    The advocates' export (python -m bot reviews export) is such a file.

    Example: python -m bot phrases import reviewed.csv
    """
    from bot.phrases import PhraseError, import_phrases

    try:
        report = import_phrases(Path(file), force=force)
    except PhraseError as exc:
        _fail(str(exc))
    _print_phrase_report(report)
    if report.refused:
        raise SystemExit(1)


@cli.command()
@click.argument("model", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--cases", "cases_path", type=click.Path(exists=True, dir_okay=False), help="Dev cases (default: the shared dev set).")
@click.option("--crisis-cases", type=click.Path(exists=True, dir_okay=False), help="Crisis test file (default: tests/data/crisis_cases.yml).")
@click.option("--folds", default=3, show_default=True, help="Intent cross-validation folds (0 to skip it).")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), help="HTML report (default: var/reports/MODEL.html).")
def evaluate(model: Optional[str], cases_path: Optional[str], crisis_cases: Optional[str], folds: int, report_path: Optional[str]) -> None:
    """Evaluate a model (default: the newest) and compare it with the live one.

    Runs intent cross-validation, the dev cases and the crisis test file
    through the whole bot, writes an HTML report (per-intent precision,
    recall and F1, a confusion matrix, the misclassified phrases) and prints
    the comparison with the live model.

    Example: python -m bot evaluate --folds 0
    """
    from bot import registry
    from bot.model_eval import cross_validate, evaluate_model
    from bot.without_tensorflow import install_for_config

    install_for_config(paths.project_dir() / "config.yml")  # a model that needs TensorFlow is refused clearly
    from bot.report import comparison_text, render
    from bot.training import all_models

    candidate = Path(model) if model else (all_models() or [None])[0]
    if candidate is None:
        _fail("no model to evaluate: run python -m bot train")
    dev = Path(cases_path) if cases_path else default_cases()
    crisis = Path(crisis_cases) if crisis_cases else default_crisis_cases()
    click.echo(f"evaluating {candidate.name} on {dev.name} and {crisis.name} ...")
    result = evaluate_model(candidate, dev, crisis)
    live_path = registry.live_model()
    live = evaluate_model(live_path, dev, crisis) if live_path and live_path != candidate else None
    cv = None
    if folds and folds > 1:
        click.echo(f"intent cross-validation, {folds} folds ...")
        cv = cross_validate(folds)
    out = Path(report_path) if report_path else paths.var_dir() / "reports" / candidate.name.replace(".tar.gz", ".html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(result, live, cv), encoding="utf-8")
    click.echo(comparison_text(result, live))
    click.echo(f"report: {out}")


@cli.command()
@click.argument("model", required=False, type=click.Path(exists=True, dir_okay=False))
@click.option("--force", is_flag=True, help="Promote even if the gate refuses (needs --reason).")
@click.option("--reason", default="", help="Why a refused model is promoted anyway (recorded).")
@click.option("--cases", "cases_path", type=click.Path(exists=True, dir_okay=False), help="Dev cases for the gate.")
@click.option("--crisis-cases", type=click.Path(exists=True, dir_okay=False), help="Crisis test file for the gate.")
def promote(model: Optional[str], force: bool, reason: str, cases_path: Optional[str], crisis_cases: Optional[str]) -> None:
    """Ship a model: only if it hands off every crisis and answers no worse.

    Gate: crisis recall on the crisis test file is 100 % and dev-set topic
    accuracy dropped by at most one point against the live model. Then the
    running servers (BOT_SERVER_URLS, default http://127.0.0.1:5005) load it
    through Rasa's HTTP API without dropping conversations, and the previous
    model is kept for rollback.

    Example: python -m bot promote
    """
    from bot import registry
    from bot.model_eval import evaluate_model
    from bot.promote import gate, hot_swap
    from bot.without_tensorflow import install_for_config

    install_for_config(paths.project_dir() / "config.yml")  # a model that needs TensorFlow is refused clearly
    from bot.report import comparison_text
    from bot.training import all_models

    candidate = Path(model) if model else (all_models() or [None])[0]
    if candidate is None:
        _fail("no model to promote: run python -m bot train")
    if force and not reason.strip():
        _fail("--force needs --reason: say why this model ships despite the gate")
    live_path = registry.live_model()
    if live_path == candidate:
        click.echo(f"{candidate.name} is already live")
        return
    dev = Path(cases_path) if cases_path else default_cases()
    crisis = Path(crisis_cases) if crisis_cases else default_crisis_cases()
    click.echo(f"checking {candidate.name} against the live model {live_path.name if live_path else '(none)'} ...")
    result = evaluate_model(candidate, dev, crisis)
    live = evaluate_model(live_path, dev, crisis) if live_path else None
    click.echo(comparison_text(result, live))
    verdict = gate(result, live)
    if not verdict.passed:
        for why in verdict.reasons:
            click.echo(f"- {why}", err=True)
        if not force:
            _fail(f"refused to promote {candidate.name} (use --force --reason TEXT to override)")
        click.echo(f"promoting despite the gate: {reason}", err=True)
    for swap in hot_swap(candidate):
        click.echo(f"{swap.url}: {swap.detail}")
    entry = registry.record_promotion(
        candidate, forced=force and not verdict.passed, reason=reason,
        report={"topic_accuracy": result["dev"]["topic_accuracy"], "crisis_recall": result["crisis_file"]["crisis_recall"]},
    )
    click.echo(f"{candidate.name} is live (previous: {entry['previous'] or 'none'})")


@cli.command()
def rollback() -> None:
    """Go back to the model that was live before the current one.

    Example: python -m bot rollback
    """
    from bot import registry
    from bot.promote import hot_swap

    previous = registry.previous_model()
    if not previous or not (paths.models_dir() / previous).exists():
        _fail("no previous model to roll back to")
    for swap in hot_swap(paths.models_dir() / previous):
        click.echo(f"{swap.url}: {swap.detail}")
    registry.record_rollback(previous)
    click.echo(f"{previous} is live again")


@cli.command()
def models() -> None:
    """List the trained models and show which one is live.

    Example: python -m bot models
    """
    from bot import registry

    for entry in registry.listing():
        click.echo(f"{'*' if entry['live'] else ' '} {entry['model']}  {entry['size_kb']} KB")


def default_crisis_cases() -> Path:
    return paths.project_dir() / "tests" / "data" / "crisis_cases.yml"


def default_cases() -> Path:
    shared = paths.project_dir().parent / "shared" / "eval" / "dev_cases.yml"
    return shared if shared.exists() else paths.project_dir() / "tests" / "data" / "dev_cases.yml"


@cli.command()
@click.option("--only", multiple=True, type=click.Choice(["baseline", "project", "project2", "project3"]),
              help="Measure only these set-ups (repeatable). Ratios need the baseline.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default="docs/benchmarks.md", show_default=True)
@click.option("--skip-training", is_flag=True, help="Do not time the maintainers' train and finetune commands.")
@click.option("--retrain-baseline", is_flag=True, help="Train the baseline again even if var/bench has it for this data.")
def bench(only: tuple, out_path: str, skip_training: bool, retrain_baseline: bool) -> None:
    """Measure this bot against stock Rasa (rasa init config) in one run.

    Trains both from scratch, starts each server, and loads it over REST from a
    separate process: one visitor, 50 visitors back to back, 150 visitors who
    write every 2-4 s. Prints the table and writes it to docs/benchmarks.md.
    Takes about 15 minutes.

    Example: python -m bot bench
    """
    from bot.bench.runner import run_benchmark, write_markdown
    from bot.bench.training import measure_training

    variants = run_benchmark(log=lambda m: click.echo(m), only=list(only) or None,
                             reuse_baseline=not retrain_baseline)
    training = None
    if not skip_training:
        click.echo("maintainers' training:")
        training = measure_training(log=lambda m: click.echo(m))
    from bot.bench.runner import detector_ms

    table = write_markdown(variants, paths.project_dir() / out_path, training, detector_ms())
    click.echo("\n" + table + f"\n\nwritten to {out_path}")


def quiet_logging() -> None:
    """Warnings only, except the training progress (one line per component)."""
    import logging

    os.environ.setdefault("RASA_TELEMETRY_ENABLED", "false")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("SQLALCHEMY_SILENCE_UBER_WARNING", "1")
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("rasa.engine.training.hooks").setLevel(logging.INFO)
    try:
        import structlog

        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    except ImportError:  # pragma: no cover
        pass


def main() -> None:
    quiet_logging()
    cli(prog_name="python -m bot")


if __name__ == "__main__":
    main()
