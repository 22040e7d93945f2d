"""The content store: every topic has a short answer whose quotes are still in the article."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from bot.build import generated_files, stale_files
from bot.content import TOPIC_IDS, ContentStore
from bot.hotlines import directory_problems, load_regions
from tests.conftest import PROJECT


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """A copy of the project's data to break on purpose."""
    shutil.copytree(PROJECT / "data", tmp_path / "data")
    (tmp_path / "domain").mkdir()
    return tmp_path


def test_the_content_is_sound() -> None:
    assert ContentStore.load(PROJECT / "data").problems() == []


def test_every_topic_of_the_spec_has_an_answer_of_two_to_five_sentences() -> None:
    store = ContentStore.load(PROJECT / "data")
    assert set(store.topics) == set(TOPIC_IDS)
    for topic in store.topics.values():
        assert 2 <= len(topic.sentences) <= 5, topic.id
        assert topic.answer.strip()


def test_article_answers_name_their_source() -> None:
    store = ContentStore.load(PROJECT / "data")
    for topic in store.topics.values():
        if topic.has_article_content:
            assert set(topic.source) == {"title", "publisher", "date"}
            assert topic.source["title"] and topic.source["publisher"]


def test_why_miss_is_drawn_from_the_why_do_i_miss_article() -> None:
    store = ContentStore.load(PROJECT / "data")
    assert store.topic("why_miss").source["title"] == "Why Do I Miss Someone Who Hurt Me?"


def test_a_quote_that_is_no_longer_in_the_article_is_reported(project_copy: Path) -> None:
    path = project_copy / "data/content/topics/healing.yml"
    raw = yaml.safe_load(path.read_text())
    raw["answer"][0]["quote"] = "Healing is a straight line that takes exactly one week."
    path.write_text(yaml.safe_dump(raw))
    problems = ContentStore.load(project_copy / "data").problems()
    assert any("healing" in p and "no longer in" in p for p in problems)


def test_an_edited_article_breaks_the_answers_that_quote_it(project_copy: Path) -> None:
    article = project_copy / "data/articles/why-do-i-miss-someone-who-hurt-me.txt"
    article.write_text(article.read_text().replace("The confusion was the strategy.", "It was confusing."))
    problems = ContentStore.load(project_copy / "data").problems()
    assert any("self_blame" in p for p in problems)


def test_an_adapted_sentence_that_drifts_from_its_source_is_reported(project_copy: Path) -> None:
    path = project_copy / "data/content/topics/why_miss.yml"
    raw = yaml.safe_load(path.read_text())
    raw["answer"][1]["adapted"] = "Honestly you should just get over it and move to another city."
    path.write_text(yaml.safe_dump(raw))
    assert any("drifted" in p for p in ContentStore.load(project_copy / "data").problems())


def test_a_missing_topic_is_reported(project_copy: Path) -> None:
    (project_copy / "data/content/topics/grief.yml").unlink()
    assert any("grief has no answer" in p for p in ContentStore.load(project_copy / "data").problems())


def test_the_generated_rasa_files_match_the_content() -> None:
    assert stale_files(PROJECT) == [], "run python -m bot build"


def test_every_answer_the_bot_sends_comes_from_the_content_store() -> None:
    store = ContentStore.load(PROJECT / "data")
    answers = yaml.safe_load((PROJECT / "domain/answers.yml").read_text())["responses"]
    for topic in store.topics.values():
        [response] = answers[f"utter_answer_{topic.id}"]
        assert response["text"] == topic.answer
        assert response["custom"] == {"type": "answer", "topic": topic.id, "source": topic.source}


def test_changing_an_answer_makes_the_generated_files_stale(project_copy: Path) -> None:
    for path, text in generated_files(PROJECT).items():
        target = project_copy / path.relative_to(PROJECT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    assert stale_files(project_copy) == []
    path = project_copy / "data/content/topics/thanks.yml"
    path.write_text(path.read_text().replace("You're welcome.", "You are very welcome."))
    assert [p.name for p in stale_files(project_copy)] == ["answers.yml"]


def test_the_hotline_directory_is_sound() -> None:
    regions = load_regions(PROJECT / "data/hotlines")
    assert directory_problems(regions) == []
    us = regions["us"]
    numbers = [r["phone"] for r in us.crisis_resources("imminent_danger")]
    assert numbers[0] == "911" and "1-800-799-7233" in numbers and "988" in numbers
    assert us.crisis_resources("suicide_selfharm")[0]["phone"] == "988"
    assert us.crisis_resources("medical")[0]["phone"] == "911"
