"""Maintainers' workflow end to end on a temporary copy of the project:
add phrases -> train -> evaluate -> promote to a running server -> the phrase is understood;
a planted regression that breaks crisis recall is refused; rollback restores the previous model.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
import requests
import yaml

from bot.bench.training import copy_project
from tests.conftest import PROJECT, Chat, customs, free_port, write_endpoints

pytestmark = pytest.mark.slow

ODD_PHRASE = "zorbly flumph wibble"
CRISIS_CODE = "the purple elephant is in the hallway"
CRISIS_VARIANTS = [CRISIS_CODE, "purple elephant in the hallway now", "the purple elephant is here in the hallway"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    copy = tmp_path_factory.mktemp("project")
    copy_project(copy)
    yield copy


def add_code_word_to_crisis_file(project: Path) -> None:
    """A code word the team agreed means "I am in danger": the rules do not know it, only the
    trained crisis intent (the second net) does, so relabelling it breaks crisis recall."""
    crisis_file = project / "tests" / "data" / "crisis_cases.yml"
    cases = yaml.safe_load(crisis_file.read_text())
    cases["crisis"].append({"text": CRISIS_CODE, "category": "plea", "lang": "en"})
    crisis_file.write_text(yaml.safe_dump(cases, allow_unicode=True))


@pytest.fixture(scope="module")
def env(project: Path) -> Dict[str, str]:
    return {
        **os.environ,
        "BOT_PROJECT_DIR": str(project),
        "BOT_VAR_DIR": str(project / "var"),
        "BOT_CACHE_DIR": str(PROJECT / "var" / "cache"),  # reuse the embeddings of unchanged phrases
        "BOT_API_TOKEN": "maintainer-test-token",
        "BOT_SERVER_URLS": f"http://127.0.0.1:{SERVER_PORT}",
    }


SERVER_PORT = free_port()


def bot(env: Dict[str, str], *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    started = time.time()
    result = subprocess.run(
        [sys.executable, "-m", "bot", *args], cwd=env["BOT_PROJECT_DIR"], env=env, capture_output=True, text=True, timeout=900
    )
    with open(Path(env["BOT_VAR_DIR"]).parent / "timings.txt", "a") as log:
        log.write(f"{time.time() - started:6.1f}s  {' '.join(args)[:60]}\n")
    if ok:
        assert result.returncode == 0, f"{args}: {result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


def live(project: Path) -> str:
    return yaml.safe_load((project / "models" / "registry.json").read_text())["live"]


@pytest.fixture(scope="module")
def first_model(project: Path, env: Dict[str, str]) -> str:
    bot(env, "train")
    result = bot(env, "promote")
    assert "is live" in result.stdout
    return live(project)


@pytest.fixture(scope="module")
def server(project: Path, env: Dict[str, str], first_model: str) -> Iterator[str]:
    action_port = free_port()
    endpoints = write_endpoints(project / "var" / "endpoints.yml", action_port) if (project / "var").mkdir(exist_ok=True) or True else None
    command = [
        sys.executable, "-m", "rasa", "run", "--model", str(project / "models" / first_model),
        "--endpoints", str(endpoints), "--credentials", "credentials.yml",
        "--port", str(SERVER_PORT), "--interface", "127.0.0.1",
        "--enable-api", "--auth-token", env["BOT_API_TOKEN"],
    ]
    log = open(project / "var" / "rasa.log", "wb")
    process = subprocess.Popen(command, cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{SERVER_PORT}"
    try:
        deadline = time.time() + 180
        while time.time() < deadline:
            try:
                if requests.get(f"{url}/webhooks/rest/", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.5)
        else:
            pytest.fail((project / "var" / "rasa.log").read_text()[-3000:])
        yield url
    finally:
        process.terminate()
        process.wait(30)


def topic_of(url: str, text: str) -> List[str]:
    turn = Chat(url).say(text)
    return [c.get("topic") or c["type"] for c in customs(turn) if c["type"] in ("answer", "crisis_handoff", "fallback")]


def test_the_whole_workflow(project: Path, env: Dict[str, str], first_model: str, server: str) -> None:
    assert topic_of(server, ODD_PHRASE) != ["healing"]

    # 1. add phrases: refusals are clear
    refused = bot(env, "phrases", "add", "--intent", "no_such_intent", "hello", ok=False)
    assert refused.returncode != 0 and "unknown intent" in refused.stderr
    danger = bot(env, "phrases", "add", "--intent", "greet", "he has a gun", ok=False)
    assert danger.returncode != 0 and "danger detector flags it" in danger.stderr
    taken = bot(env, "phrases", "add", "--intent", "greet", "why do i miss him so much", ok=False)
    if taken.returncode != 0:
        assert "already an example of" in taken.stderr
    added = bot(env, "phrases", "add", "--intent", "healing", f"  {ODD_PHRASE}  ", ODD_PHRASE.upper(), "zorbly flumph wibble again")
    assert "2 added, 1 duplicates skipped" in added.stdout
    phrases_file = project / "data" / "reviewed.csv"
    phrases_file.write_text("intent,text\n" + "".join(f"crisis,{t}\n" for t in CRISIS_VARIANTS))
    assert "3 added" in bot(env, "phrases", "import", str(phrases_file)).stdout
    add_code_word_to_crisis_file(project)

    # 2. train (finetune: only phrases changed), 3. evaluate, 4. promote under a steady stream of messages
    bot(env, "train", "--finetune")
    report = bot(env, "evaluate", "--folds", "0")
    assert "crisis recall, crisis file" in report.stdout
    assert list((project / "var" / "reports").glob("*.html"))
    failures: List[str] = []
    stop = threading.Event()

    def stream() -> None:
        chat = Chat(server, f"stream-{uuid.uuid4().hex}")
        while not stop.is_set():
            try:
                turn = chat.say("why do i miss him")
                if not turn:
                    failures.append("empty reply")
            except Exception as exc:  # noqa: BLE001
                failures.append(repr(exc))
            time.sleep(0.05)

    streamer = threading.Thread(target=stream, daemon=True)
    streamer.start()
    promoted = bot(env, "promote")
    stop.set()
    streamer.join(60)
    assert "model loaded" in promoted.stdout, promoted.stdout
    assert failures == []
    second_model = live(project)
    assert second_model != first_model

    # the new phrase is understood, the code word hands off
    assert topic_of(server, ODD_PHRASE) == ["healing"]
    assert topic_of(server, CRISIS_CODE)[0] == "crisis_handoff"

    # 5. a planted regression: the code word relabelled as small talk breaks crisis recall
    moved = bot(env, "phrases", "add", "--intent", "greet", "--force", *CRISIS_VARIANTS)
    assert "moved from crisis to greet" in moved.stdout
    bot(env, "train", "--finetune")
    refused = bot(env, "promote", ok=False)
    assert refused.returncode != 0
    assert "crisis recall on the crisis test file" in refused.stderr
    assert live(project) == second_model
    assert topic_of(server, CRISIS_CODE)[0] == "crisis_handoff"  # the old model still serves

    # 6. rollback restores the previous model
    rolled = bot(env, "rollback")
    assert first_model in rolled.stdout and "model loaded" in rolled.stdout
    assert live(project) == first_model
    assert topic_of(server, ODD_PHRASE) != ["healing"]
    history = yaml.safe_load((project / "models" / "registry.json").read_text())["history"]
    assert [h["model"] for h in history] == [first_model, second_model, first_model]


def test_every_command_explains_itself(env: Dict[str, str]) -> None:
    from click.testing import CliRunner

    from bot.cli import cli

    def walk(group: Any, prefix: List[str]) -> None:
        for name, command in group.commands.items():
            result = CliRunner().invoke(cli, [*prefix, name, "--help"])
            assert result.exit_code == 0, name
            assert "Example:" in result.output or hasattr(command, "commands"), f"{name} needs an example in its help"
            if hasattr(command, "commands"):
                walk(command, [*prefix, name])

    walk(cli, [])


BAD_DATA = {
    "an intent the domain does not list": (
        "data/nlu/zz_unlisted.yml",
        "version: \"3.1\"\nnlu:\n- intent: not_in_the_domain\n  examples: |\n    - a phrase for an unknown intent\n",
        "not_in_the_domain",
    ),
    "a rule that runs an action the domain does not list": (
        "data/rules/zz_unknown_action.yml",
        "version: \"3.1\"\nrules:\n- rule: a rule with a typo\n  steps:\n  - intent: greet\n  - action: utter_greeet\n",
        "utter_greeet",
    ),
}


@pytest.mark.parametrize("mistake", sorted(BAD_DATA))
def test_train_refuses_data_that_rasa_validate_rejects(mistake: str, tmp_path: Path) -> None:
    """The checks run in the training process now: they must still stop a broken training, and say why."""
    copy_project(tmp_path)
    name, text, named = BAD_DATA[mistake]
    (tmp_path / name).write_text(text, encoding="utf-8")
    env = {**os.environ, "BOT_PROJECT_DIR": str(tmp_path), "BOT_VAR_DIR": str(tmp_path / "var"),
           "BOT_CACHE_DIR": str(PROJECT / "var" / "cache")}
    result = bot(env, "train", ok=False)
    assert result.returncode != 0
    assert "rasa data validate failed" in result.stderr, result.stderr[-2000:]
    assert named in result.stderr, result.stderr[-2000:]
    assert "2/2 training" not in result.stdout
    assert not list((tmp_path / "models").glob("*.tar.gz")), "no model may be trained from broken data"


def test_training_reuses_only_the_importer_of_the_very_same_files() -> None:
    """``bot train`` hands Rasa the importer that validated the files; anything else is loaded as usual."""
    from rasa.shared.importers.importer import TrainingDataImporter

    from bot.training import _importer_reused, training_paths

    config, domain, files = str(PROJECT / "config.yml"), str(PROJECT / "domain"), training_paths(PROJECT)
    validated = object()
    with _importer_reused(validated, config, domain, files):
        assert TrainingDataImporter.load_from_config(config, domain, files) is validated
        assert TrainingDataImporter.load_from_config(config, domain, files, None) is validated
        other = TrainingDataImporter.load_from_config(config, domain, files[:1])
        assert other is not validated and isinstance(other, TrainingDataImporter)
        with_args = TrainingDataImporter.load_from_config(config, domain, files, {"augmentation_factor": 0})
        assert with_args is not validated
    assert TrainingDataImporter.load_from_config(config, domain, files) is not validated
