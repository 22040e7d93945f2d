"""The flow book: what the bot says in every situation, generated from the project's own data files.

Advocates check the bot here without reading YAML. Nothing is copied: every
text comes from the content store, the NLU files, the danger rules, the
hotline directory and the rules at the moment the page is built, so the
book cannot drift from what the bot does. The web app shows it under
/review/flows; ``python -m bot flowbook --out FILE.html`` writes it as one
self-contained HTML file.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml

from bot import paths
from bot.build import flat, topic_steps
from bot.content import TOPIC_IDS, ContentStore
from bot.danger.patterns import load_rule_sets
from bot.hotlines import CRISIS_CATEGORIES, HANDOFF_LANGUAGES, configured_region_id, handoff_text, load_regions

SAMPLE_SIZE = 8


@dataclass
class TopicPage:
    id: str
    question: str
    example_count: int
    examples: List[str]
    answer: str
    sentences: List[Dict[str, Any]]
    buttons: List[Dict[str, str]]
    source: Optional[Dict[str, Any]]
    passages: List[str]
    disclaimer: str  # when the disclaimer follows this answer
    resources: List[Dict[str, Any]] = field(default_factory=list)
    steps: List[str] = field(default_factory=list)


@dataclass
class CrisisCategory:
    id: str
    rules: List[Dict[str, Any]]
    handoffs: Dict[str, str]  # language -> text for the server's region
    resources: List[Dict[str, Any]]


@dataclass
class FlowBook:
    disclaimer: str
    topics: List[TopicPage]
    crisis: List[CrisisCategory]
    crisis_examples: Dict[str, Any]
    regions: List[Dict[str, Any]]
    region: str
    fallback: Dict[str, str]
    messages: Dict[str, str]
    rules: List[Dict[str, Any]]


def examples_by_intent(data_dir: Path) -> Dict[str, List[str]]:
    found: Dict[str, List[str]] = {}
    for path in sorted((data_dir / "nlu").rglob("*.yml")):
        for block in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("nlu", []):
            lines = [l.strip()[2:].strip() for l in str(block.get("examples", "")).splitlines() if l.strip().startswith("- ")]
            found.setdefault(block.get("intent"), []).extend(lines)
    return found


def build_flowbook(project_dir: Optional[Path] = None) -> FlowBook:
    project_dir = Path(project_dir) if project_dir else paths.project_dir()
    data_dir = project_dir / "data"
    store = ContentStore.load(data_dir)
    regions = load_regions(data_dir / "hotlines")
    region_id = configured_region_id()
    region = regions[region_id]
    examples = examples_by_intent(data_dir)
    chooser = random.Random(7)  # a stable sample, so reviewers see the same page twice
    disclaimer = flat(store.messages["disclaimer"])

    topics = []
    for topic_id in TOPIC_IDS:
        topic = store.topic(topic_id)
        phrases = examples.get(topic_id, [])
        topics.append(
            TopicPage(
                id=topic_id,
                question=topic.question,
                example_count=len(phrases),
                examples=chooser.sample(phrases, min(SAMPLE_SIZE, len(phrases))),
                answer=topic.answer,
                sentences=[
                    {"kind": s.kind, "text": s.text, "from": list(s.origins)} for s in topic.sentences
                ],
                buttons=[{"title": store.topic(f).question, "payload": f"/{f}"} for f in topic.follow_ups],
                source=topic.source,
                passages=list(topic.passages),
                disclaimer="always" if topic.has_article_content else "first message only",
                resources=region.referral_resources() if topic.resources else [],
                steps=topic_steps(topic),
            )
        )

    rule_sets = load_rule_sets(data_dir / "danger")
    crisis = []
    for category in CRISIS_CATEGORIES:
        rules = [
            {
                "id": rule.id,
                "language": rule.language,
                "catches": rule.catches,
                "patterns": list(rule.patterns[:4]),
                "more": max(0, len(rule.patterns) - 4),
                "unless": list(rule.unless),
            }
            for rule_set in rule_sets
            for rule in rule_set.rules
            if rule.category == category
        ]
        crisis.append(
            CrisisCategory(
                id=category,
                rules=rules,
                handoffs={lang: handoff_text(region, category, lang, store.messages) for lang in HANDOFF_LANGUAGES},
                resources=region.crisis_resources(category),
            )
        )
    crisis_examples = {"count": len(examples.get("crisis", [])), "sample": chooser.sample(examples.get("crisis", []), min(SAMPLE_SIZE, len(examples.get("crisis", []))))}

    rules = []
    for path in sorted((data_dir / "rules").glob("*.yml")):
        for rule in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("rules", []):
            steps = rule.get("steps", [])
            rules.append(
                {
                    "name": rule.get("rule"),
                    "first_message": bool(rule.get("conversation_start")),
                    "steps": [("intent", s["intent"]) if "intent" in s else ("action", s.get("action")) for s in steps],
                }
            )

    m = store.messages
    return FlowBook(
        disclaimer=disclaimer,
        topics=topics,
        crisis=crisis,
        crisis_examples=crisis_examples,
        regions=[
            {"id": r.id, "name": r.name, "resources": [dict(v, key=k) for k, v in r.resources.items()], "order": r.order}
            for r in regions.values()
        ],
        region=region_id,
        fallback={"text": flat(m["fallback"]), "unavailable": flat(m["fallback_unavailable"]), "degraded": flat(m["degraded"])},
        messages={
            "keep_talking": flat(m["keep_talking"]),
            "no_more_now": flat(m["no_more_now"]),
            "affirm_no_context": flat(m["affirm_no_context"]),
            "deny_no_context": flat(m["deny_no_context"]),
            "conversation_deleted": flat(m["conversation_deleted"]),
        },
        rules=rules,
    )


def rules_diagram(rules: List[Dict[str, Any]]) -> Dict[str, Any]:
    """A simple diagram of the rules: one row per rule, the visitor's intent then the bot's actions."""
    box_w, box_h, gap, row_h, left = 200, 26, 28, 38, 10
    rows = []
    width = 0
    for index, rule in enumerate(rules):
        y = 30 + index * row_h
        boxes = []
        x = left
        for kind, label in rule["steps"]:
            boxes.append({"x": x, "y": y, "w": box_w, "h": box_h, "kind": kind, "label": label})
            x += box_w + gap
        width = max(width, x)
        rows.append({"name": rule["name"], "first": rule["first_message"], "boxes": boxes, "y": y})
    return {"rows": rows, "width": width + 10, "height": 40 + len(rules) * row_h, "box_h": box_h, "gap": gap}
