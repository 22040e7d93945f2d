"""Adding example phrases to the training data, safely.

A phrase goes to ``data/nlu/<intent>.yml``. It is refused (unless forced)
when the intent is unknown, when the phrase already belongs to another
intent, or when the danger detector flags it and the intent is not
``crisis``: a danger phrase taught as, say, ``greet`` would teach the second
net to miss it.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

import yaml

from bot import paths

CRISIS_INTENT = "crisis"
MAX_PHRASE_LENGTH = 400
_FORBIDDEN = re.compile(r"[\[\]{}]")


class PhraseError(ValueError):
    """The whole request cannot be done (unknown intent, unreadable file); the message says why."""


@dataclass
class PhraseReport:
    added: List[Tuple[str, str]] = field(default_factory=list)
    duplicates: List[Tuple[str, str]] = field(default_factory=list)
    moved: List[Tuple[str, str, str]] = field(default_factory=list)  # text, from, to
    refused: List[Tuple[str, str]] = field(default_factory=list)  # text, reason

    def merge(self, other: "PhraseReport") -> None:
        self.added += other.added
        self.duplicates += other.duplicates
        self.moved += other.moved
        self.refused += other.refused


def normalise(text: str) -> str:
    return re.sub(r"\s+", " ", str(text or "")).strip()


def _key(text: str) -> str:
    return normalise(text).lower()


def known_intents(project_dir: Optional[Path] = None) -> List[str]:
    project_dir = Path(project_dir) if project_dir else paths.project_dir()
    domain = yaml.safe_load((project_dir / "domain" / "core.yml").read_text(encoding="utf-8"))
    return [i if isinstance(i, str) else next(iter(i)) for i in domain["intents"]]


def _nlu_files(project_dir: Path) -> List[Path]:
    return sorted((project_dir / "data" / "nlu").rglob("*.yml"))


def _examples(block: Dict) -> List[str]:
    return [l.strip()[2:].strip() for l in str(block.get("examples", "")).splitlines() if l.strip().startswith("- ")]


def index(project_dir: Optional[Path] = None) -> Dict[str, Tuple[str, Path]]:
    """Every example phrase (lowercased) -> (its intent, its file)."""
    project_dir = Path(project_dir) if project_dir else paths.project_dir()
    found: Dict[str, Tuple[str, Path]] = {}
    for path in _nlu_files(project_dir):
        for block in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("nlu", []):
            for example in _examples(block):
                found.setdefault(_key(example), (block["intent"], path))
    return found


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(
    str,
    lambda dumper, data: dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None),
)


def _write_examples(path: Path, intent: str, add: Iterable[str] = (), remove: Iterable[str] = ()) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8")) if path.exists() else None
    document = document or {"version": "3.1", "nlu": []}
    blocks = document.setdefault("nlu", [])
    block = next((b for b in blocks if b.get("intent") == intent), None)
    if block is None:
        block = {"intent": intent, "examples": ""}
        blocks.append(block)
    removing = {_key(r) for r in remove}
    examples = [e for e in _examples(block) if _key(e) not in removing] + list(add)
    block["examples"] = "".join(f"- {e}\n" for e in examples)
    if not examples:
        blocks.remove(block)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.dump(document, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1000), encoding="utf-8")


def _problem(text: str) -> Optional[str]:
    if not text:
        return "empty"
    if len(text) > MAX_PHRASE_LENGTH:
        return f"longer than {MAX_PHRASE_LENGTH} characters"
    if text.startswith("/"):
        return 'starts with "/", which Rasa reads as an intent name'
    if _FORBIDDEN.search(text):
        return "contains [ ] { }, which Rasa reads as entity markup"
    return None


def add_phrases(
    intent: str, texts: Iterable[str], force: bool = False, project_dir: Optional[Path] = None
) -> PhraseReport:
    """Adds phrases to an intent; see the module docstring for what is refused."""
    project_dir = Path(project_dir) if project_dir else paths.project_dir()
    intents = known_intents(project_dir)
    if intent not in intents:
        raise PhraseError(f"unknown intent {intent!r}: use one of {', '.join(intents)}")
    existing = index(project_dir)
    report = PhraseReport()
    to_add: List[str] = []
    to_remove: Dict[Tuple[str, Path], List[str]] = {}
    detector = None
    for raw in texts:
        text = normalise(raw)
        problem = _problem(text)
        if problem:
            report.refused.append((text, problem))
            continue
        key = _key(text)
        if key in {_key(t) for t in to_add}:
            report.duplicates.append((intent, text))
            continue
        if key in existing:
            owner, path = existing[key]
            if owner == intent:
                report.duplicates.append((intent, text))
                continue
            if not force:
                report.refused.append((text, f"already an example of {owner!r} ({path.relative_to(project_dir)}); --force moves it"))
                continue
            to_remove.setdefault((owner, path), []).append(text)
            report.moved.append((text, owner, intent))
        if intent != CRISIS_INTENT:
            if detector is None:
                from bot.danger import load_detector

                detector = load_detector(project_dir / "data" / "danger")
            detection = detector.detect(text)
            if detection and not force:
                report.refused.append((text, f"the danger detector flags it ({detection.category}); a crisis phrase belongs to 'crisis' (--force to add anyway)"))
                continue
        to_add.append(text)
        report.added.append((intent, text))
    for (owner, path), texts_ in to_remove.items():
        _write_examples(path, owner, remove=texts_)
    if to_add:
        _write_examples(project_dir / "data" / "nlu" / f"{intent}.yml", intent, add=to_add)
    return report


def read_phrase_file(path: Path) -> List[Tuple[str, str]]:
    """(intent, text) rows from a CSV or YAML file with intent and text columns."""
    path = Path(path)
    if not path.exists():
        raise PhraseError(f"no such file: {path}")
    rows: List[Tuple[str, str]] = []
    if path.suffix.lower() in (".yml", ".yaml"):
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        items = document.get("phrases", document) if isinstance(document, dict) else document
        if not isinstance(items, list):
            raise PhraseError('a YAML file needs a list of {intent, text} (or "phrases:" with such a list)')
        for item in items:
            if not isinstance(item, dict) or "intent" not in item or "text" not in item:
                raise PhraseError(f"each entry needs an intent and a text: {item!r}")
            rows.append((str(item["intent"]), str(item["text"])))
    else:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if not reader.fieldnames or not {"intent", "text"} <= set(reader.fieldnames):
                raise PhraseError("a CSV file needs a header with the columns intent and text")
            rows = [(r["intent"], r["text"]) for r in reader]
    return rows


def import_phrases(path: Path, force: bool = False, project_dir: Optional[Path] = None) -> PhraseReport:
    rows = read_phrase_file(path)
    intents = set(known_intents(project_dir))
    report = PhraseReport()
    by_intent: Dict[str, List[str]] = {}
    for intent, text in rows:
        if intent not in intents:
            report.refused.append((text, f"unknown intent {intent!r}"))
            continue
        by_intent.setdefault(intent, []).append(text)
    for intent, texts in by_intent.items():
        report.merge(add_phrases(intent, texts, force=force, project_dir=project_dir))
    return report
