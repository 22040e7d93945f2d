"""The hotline directory: who to call, in which order, written out for the handoff.

Resources live in ``data/hotlines/<region>.yml`` so that an organisation can
change numbers without touching code. The crisis category decides the order
(988 first for suicide and self-harm, 911 first for imminent danger and
medical emergencies).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from bot import paths

#: Crisis categories of SPEC.md (the order is the one advocates read them in).
CRISIS_CATEGORIES: Tuple[str, ...] = (
    "imminent_danger",
    "threat",
    "weapon",
    "recent_violence",
    "strangulation",
    "suicide_selfharm",
    "child_or_pet",
    "stalking",
    "confinement",
    "medical",
    "plea",
    "sexual_violence",
)

#: Languages the handoff text is written in.
HANDOFF_LANGUAGES: Tuple[str, ...] = ("en", "es")

DEFAULT_REGION = "us"
RESOURCE_KEYS = ("name", "phone", "sms", "sms_body", "url")


@dataclass(frozen=True)
class Region:
    """One region's directory file."""

    id: str
    name: str
    emergency_number: str
    resources: Dict[str, Dict[str, Any]]
    order: Dict[str, List[str]]
    referral: List[str]

    def crisis_resources(self, category: str) -> List[Dict[str, Any]]:
        """The resources of the handoff for ``category``, most important first."""
        keys = self.order.get(category) or self.order["default"]
        return [self.payload(key) for key in keys]

    def referral_resources(self) -> List[Dict[str, Any]]:
        return [self.payload(key) for key in self.referral]

    def payload(self, key: str) -> Dict[str, Any]:
        """A resource as the reply contract shows it (``name, phone, sms, url``)."""
        entry = self.resources[key]
        out = {k: entry.get(k) for k in ("name", "phone", "sms", "url")}
        if entry.get("sms_body"):
            out["sms_body"] = entry["sms_body"]
        return out


def load_regions(directory: Optional[Path] = None) -> Dict[str, Region]:
    """Every region file under ``data/hotlines``."""
    directory = Path(directory) if directory else paths.hotlines_dir()
    regions = {}
    for path in sorted(directory.glob("*.yml")):
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        regions[raw["region"]] = Region(
            id=raw["region"],
            name=raw["name"],
            emergency_number=str(raw["emergency_number"]),
            resources={k: dict(v) for k, v in raw["resources"].items()},
            order={k: list(v) for k, v in raw["order"].items()},
            referral=list(raw.get("referral") or []),
        )
    return regions


@lru_cache(maxsize=4)
def _cached_regions(directory: str) -> Dict[str, Region]:
    return load_regions(Path(directory))


def regions() -> Dict[str, Region]:
    return _cached_regions(str(paths.hotlines_dir()))


def configured_region_id() -> str:
    """The server's region: ``BOT_REGION`` when it names a known region, else ``us``."""
    wanted = os.environ.get("BOT_REGION", DEFAULT_REGION).strip().lower()
    return wanted if wanted in regions() else DEFAULT_REGION


def directory_problems(all_regions: Dict[str, Region]) -> List[str]:
    """Broken references in the directory files (unknown keys, missing default order)."""
    found = []
    if DEFAULT_REGION not in all_regions:
        found.append(f"the default region {DEFAULT_REGION!r} has no file")
    for region in all_regions.values():
        if "default" not in region.order:
            found.append(f"{region.id}: 'order' needs a 'default' list")
        for category, keys in region.order.items():
            if category != "default" and category not in CRISIS_CATEGORIES:
                found.append(f"{region.id}: unknown crisis category {category!r} in 'order'")
            for key in keys:
                if key not in region.resources:
                    found.append(f"{region.id}: order {category} names unknown resource {key!r}")
        for key in region.referral:
            if key not in region.resources:
                found.append(f"{region.id}: referral names unknown resource {key!r}")
        for key, entry in region.resources.items():
            if not entry.get("name") or not (entry.get("phone") or entry.get("url")):
                found.append(f"{region.id}: resource {key!r} needs a name and a phone or url")
    return found


def resource_line(resource: Dict[str, Any], lines: Dict[str, str]) -> str:
    """One resource written out for people: "- Name: call X, text START to Y or chat at Z"."""
    ways = []
    entry = dict(resource)
    entry.setdefault("url_text", (entry.get("url") or "").replace("https://", "").replace("www.", ""))
    if entry.get("phone"):
        ways.append(lines["call"].format(**entry))
    if entry.get("sms"):
        template = lines["text"] if entry.get("sms_body") else lines["text_same"]
        ways.append(template.format(**entry))
    if entry.get("url"):
        ways.append(lines["chat"].format(**entry))
    if len(ways) > 1:
        spoken = ", ".join(ways[:-1]) + lines["join_or"] + ways[-1]
    else:
        spoken = ways[0] if ways else ""
    return f"- {entry['name']}: {spoken}"


def handoff_text(region: Region, category: str, language: str, messages: Dict[str, Any]) -> str:
    """The calm handoff message: an intro, the numbers written out, the safe-device line, an offer."""
    texts = messages["crisis"][language]
    intro = texts["intro"].get(category) or texts["intro"]["default"]
    keys = region.order.get(category) or region.order["default"]
    lines = []
    for key in keys:
        entry = dict(region.resources[key])
        lines.append(resource_line(entry, texts["lines"]))
    return "\n".join([intro, *lines, texts["safe_device"], texts["offer"]])
