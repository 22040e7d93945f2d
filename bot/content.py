"""The content store: the curated answers, their source articles and fixed messages.

This is the one source of truth for what the bot says. The Rasa responses in
``domain/`` are generated from it (``bot.build``), the action server and the
flow book read it, and ``problems()`` is what the tests use to prove that every
quoted sentence still appears in its article.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from bot import paths

#: Topic ids, in the order of SPEC.md. They are part of the public API.
TOPIC_IDS: Tuple[str, ...] = (
    "why_miss",
    "trauma_bond",
    "intensity_not_love",
    "good_days_real",
    "grief",
    "still_feel_pull",
    "self_blame",
    "going_back",
    "setbacks",
    "why_hard_to_leave",
    "help_a_friend",
    "healing",
    "still_in_relationship",
    "talk_to_someone",
    "privacy",
    "disclaimer_q",
    "out_of_scope",
    "greet",
    "goodbye",
    "thanks",
)

#: Topics that are small talk or about the service rather than about the articles.
SMALL_TALK = ("greet", "goodbye", "thanks")

SENTENCE_KINDS = ("quote", "adapted", "say")


def normalise(text: str) -> str:
    """Fold typography and spacing so that a quote matches its article."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    text = text.replace("\u201c", '"').replace("\u201d", '"')
    return re.sub(r"\s+", " ", text).strip()


@dataclass(frozen=True)
class Article:
    """A published article that answers are drawn from."""

    id: str
    title: str
    publisher: str
    date: Optional[str]
    text: str
    file: str
    cites: Tuple[str, ...] = ()

    def source(self) -> Dict[str, Optional[str]]:
        """The ``source`` object of the reply contract."""
        return {"title": self.title, "publisher": self.publisher, "date": self.date}

    def contains(self, passage: str) -> bool:
        return normalise(passage) in normalise(self.text)


@dataclass(frozen=True)
class Sentence:
    """One sentence of an answer and where it comes from."""

    kind: str  # quote | adapted | say
    text: str
    origins: Tuple[str, ...] = ()  # article text it adapts (for "adapted")


@dataclass(frozen=True)
class Topic:
    """A topic id with its curated answer."""

    id: str
    question: str
    article: Optional[Article]
    passages: Tuple[str, ...]
    sentences: Tuple[Sentence, ...]
    follow_ups: Tuple[str, ...]
    resources: bool = False
    file: str = ""

    @property
    def answer(self) -> str:
        return " ".join(s.text for s in self.sentences)

    @property
    def source(self) -> Optional[Dict[str, Optional[str]]]:
        return self.article.source() if self.article else None

    @property
    def has_article_content(self) -> bool:
        """True when the answer quotes or adapts an article (so it needs the disclaimer)."""
        return self.article is not None and any(s.kind != "say" for s in self.sentences)


@dataclass
class ContentStore:
    """Everything the bot can say, loaded from ``data/content``."""

    articles: Dict[str, Article]
    topics: Dict[str, Topic]
    messages: Dict[str, Any]
    load_errors: List[str] = field(default_factory=list)

    @classmethod
    def load(cls, data_dir: Optional[Path] = None) -> "ContentStore":
        data_dir = Path(data_dir) if data_dir else paths.data_dir()
        content = data_dir / "content"
        errors: List[str] = []
        registry = yaml.safe_load((content / "articles.yml").read_text(encoding="utf-8"))
        articles = {}
        for article_id, meta in registry["articles"].items():
            text = (data_dir / "articles" / meta["file"]).read_text(encoding="utf-8")
            articles[article_id] = Article(
                id=article_id,
                title=meta["title"],
                publisher=meta["publisher"],
                date=meta.get("date"),
                text=text,
                file=meta["file"],
                cites=tuple(meta.get("cites") or ()),
            )
        topics = {}
        for path in sorted((content / "topics").glob("*.yml")):
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            try:
                topic = _parse_topic(raw, articles, path.name)
            except (KeyError, TypeError, ValueError) as exc:
                errors.append(f"{path.name}: {exc}")
                continue
            topics[topic.id] = topic
        messages = yaml.safe_load((content / "messages.yml").read_text(encoding="utf-8"))
        return cls(articles=articles, topics=topics, messages=messages, load_errors=errors)

    def topic(self, topic_id: str) -> Topic:
        return self.topics[topic_id]

    def problems(self) -> List[str]:
        """Everything that breaks the content rules; empty when the content is sound."""
        found = list(self.load_errors)
        for topic_id in TOPIC_IDS:
            if topic_id not in self.topics:
                found.append(f"topic {topic_id} has no answer (data/content/topics/{topic_id}.yml)")
        for topic in self.topics.values():
            found.extend(_topic_problems(topic, self.topics))
        return found


def _parse_topic(raw: Dict[str, Any], articles: Dict[str, Article], file: str) -> Topic:
    article_id = raw.get("article")
    if article_id is not None and article_id not in articles:
        raise ValueError(f"unknown article {article_id!r}")
    sentences = []
    for item in raw["answer"]:
        kinds = [k for k in SENTENCE_KINDS if k in item]
        if len(kinds) != 1:
            raise ValueError(f"each answer sentence needs exactly one of {SENTENCE_KINDS}: {item}")
        origins = item.get("from") or ()
        if isinstance(origins, str):
            origins = (origins,)
        sentences.append(Sentence(kind=kinds[0], text=normalise(item[kinds[0]]), origins=tuple(origins)))
    return Topic(
        id=raw["topic"],
        question=raw["question"],
        article=articles[article_id] if article_id else None,
        passages=tuple(raw.get("passage") or ()),
        sentences=tuple(sentences),
        follow_ups=tuple(raw.get("follow_ups") or ()),
        resources=bool(raw.get("resources", False)),
        file=file,
    )


def _topic_problems(topic: Topic, topics: Dict[str, Topic]) -> List[str]:
    where = f"{topic.file} ({topic.id})"
    found = []
    if topic.id not in TOPIC_IDS:
        found.append(f"{where}: {topic.id} is not a topic id of SPEC.md")
    if f"{topic.id}.yml" != topic.file:
        found.append(f"{where}: the file must be named {topic.id}.yml")
    if not 2 <= len(topic.sentences) <= 5:
        found.append(f"{where}: an answer has 2 to 5 sentences, this one has {len(topic.sentences)}")
    for follow_up in topic.follow_ups:
        if follow_up not in TOPIC_IDS or follow_up == topic.id:
            found.append(f"{where}: follow-up {follow_up!r} is not another topic id")
    if topic.article is None:
        if any(s.kind != "say" for s in topic.sentences):
            found.append(f"{where}: quotes need an article")
        return found
    for passage in topic.passages:
        if not topic.article.contains(passage):
            found.append(f"{where}: passage no longer in the article: {passage[:60]}...")
    passage_text = normalise(" ".join(topic.passages))
    for sentence in topic.sentences:
        if sentence.kind == "quote":
            quoted = [sentence.text]
        elif sentence.kind == "adapted":
            quoted = list(sentence.origins)
            if not quoted:
                found.append(f"{where}: adapted sentence has no 'from': {sentence.text[:60]}")
            elif _overlap(sentence.text, " ".join(quoted)) < 0.5:
                found.append(f"{where}: adapted sentence drifted from its source: {sentence.text[:60]}")
        else:
            continue
        for text in quoted:
            if not topic.article.contains(text):
                found.append(f"{where}: no longer in '{topic.article.title}': {text[:70]}")
            elif normalise(text) not in passage_text:
                found.append(f"{where}: not inside the topic's passage: {text[:70]}")
    return found


def _words(text: str) -> List[str]:
    return re.findall(r"[a-z']+", text.lower())


def _overlap(adapted: str, original: str) -> float:
    """Share of the adapted sentence's words that come from the original."""
    source = set(_words(original))
    words = _words(adapted)
    return sum(w in source for w in words) / max(len(words), 1)


@lru_cache(maxsize=4)
def _cached(data_dir: str) -> ContentStore:
    return ContentStore.load(Path(data_dir))


def load_content(data_dir: Optional[Path] = None) -> ContentStore:
    """The content store, loaded once per process (it never changes at run time)."""
    return _cached(str(data_dir or paths.data_dir()))
