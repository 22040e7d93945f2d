"""Reads the danger rules that advocates write and compiles them for spaCy's Matcher.

A rule is a few short patterns in a tiny word language, so that an advocate
can read and edit it without knowing spaCy:

    ``he|she|they ~2 have|hold|grab ~3 WEAPON``

- ``kill``           the word in any form (kill, kills, killed, killing, kil)
- ``kill|hurt``      any of these words
- ``WEAPON``         any word of the list ``WEAPON`` (lists are defined in the file)
- ``=used``          exactly this spelling (no other forms; ``=hit|=slapped`` for several)
- ``word?``          the word may be missing
- ``!not``           any word except this one
- ``~`` / ``~5``     up to 3 (or 5) other words in between
- ``*``              any single word
- ``/20[0-9][0-9]/``  any word matching a regular expression (numbers, years)
- ``(for good|forever)`` one of these phrases (a group may end in ``?``: optional)

A rule can also say ``unless: [past]`` (it does not fire when the message says
the abuse is in the past, "used to", "years ago", and nothing recent), list
``except:`` patterns (figures of speech that look alike: "hit me up") and say
``whole: true`` (the pattern must be the entire message: "help", "hes here").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import yaml

from bot import paths

DEFAULT_GAP = 3
CONTEXTS = ("past", "recent")


class PatternError(ValueError):
    """A rule that cannot be compiled; the message says which and why."""


@dataclass(frozen=True)
class Rule:
    """One advocate-written rule: what it catches, in which category, and its patterns."""

    id: str
    category: str
    language: str
    catches: str
    patterns: Tuple[str, ...]
    unless: Tuple[str, ...] = ()  # ("past",): silent when the abuse is in the past
    negatable: bool = False  # a "not" just before the match cancels it ("not in danger")
    excepts: Tuple[str, ...] = ()  # look-alike figures of speech that cancel a match
    whole: bool = False  # the pattern must cover the whole message


@dataclass
class RuleSet:
    """Every rule, list and context pattern of one language."""

    language: str
    lists: Dict[str, List[str]]
    rules: List[Rule]
    context: Dict[str, List[str]]  # "recent" / "ended" patterns
    negation: List[str] = field(default_factory=list)
    figures: List[str] = field(default_factory=list)  # look-alikes that cancel any rule
    file: str = ""


def load_rule_sets(directory: Optional[Path] = None) -> List[RuleSet]:
    """All rule files under ``data/danger`` (one per language)."""
    directory = Path(directory) if directory else paths.danger_dir()
    sets = []
    for path in sorted(directory.glob("*.yml")):
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if "rules" not in raw:
            continue
        language = raw["language"]
        rules = []
        for item in raw["rules"]:
            patterns = item.get("patterns") or []
            if isinstance(patterns, str):
                patterns = [patterns]
            unless = tuple(item.get("unless") or ())
            for context in unless:
                if context not in CONTEXTS:
                    raise PatternError(f"{path.name}: rule {item['id']}: unknown 'unless' {context!r}")
            rules.append(
                Rule(
                    id=item["id"],
                    category=item["category"],
                    language=language,
                    catches=item.get("catches", ""),
                    patterns=tuple(patterns),
                    unless=unless,
                    negatable=bool(item.get("negatable", False)),
                    excepts=tuple(item.get("except") or ()),
                    whole=bool(item.get("whole", False)),
                )
            )
        sets.append(
            RuleSet(
                language=language,
                lists={k: [str(w).lower() for w in v] for k, v in (raw.get("lists") or {}).items()},
                rules=rules,
                context={k: list(v or []) for k, v in (raw.get("context") or {}).items()},
                negation=[str(w).lower() for w in raw.get("negation") or []],
                figures=list(raw.get("figures") or []),
                file=path.name,
            )
        )
    return sets


def load_spelling(directory: Optional[Path] = None) -> Dict[str, Any]:
    directory = Path(directory) if directory else paths.danger_dir()
    return yaml.safe_load((directory / "spelling.yml").read_text(encoding="utf-8")) or {}


def expand(pattern: str) -> List[List[str]]:
    """Expands phrase groups: ``"end (it all|my life)"`` -> ``[[end, it, all], [end, my, life]]``."""
    units: List[List[List[str]]] = []
    rest = pattern.strip()
    while rest:
        if rest.startswith("("):
            close = rest.find(")")
            if close < 0:
                raise PatternError(f"unclosed '(' in pattern {pattern!r}")
            alternatives = [a.split() for a in rest[1:close].split("|")]
            rest = rest[close + 1 :]
            if rest.startswith("?"):
                alternatives.append([])
                rest = rest[1:]
            if any(not a for a in alternatives[:-1]) or not alternatives:
                raise PatternError(f"empty phrase in a group of pattern {pattern!r}")
            units.append(alternatives)
        else:
            word, _, rest = rest.partition(" ")
            is_regex = len(word) > 2 and word.startswith("/") and word.endswith("/")
            if not is_regex and ("(" in word or ")" in word):
                raise PatternError(f"put a space before '(' in pattern {pattern!r}")
            units.append([[word]])
        rest = rest.lstrip()
    flat: List[List[str]] = [[]]
    for alternatives in units:
        flat = [done + alt for done in flat for alt in alternatives]
    return flat


def compile_pattern(
    pattern: str, lists: Dict[str, List[str]], attr: str, canon: Any = None
) -> List[List[Dict[str, Any]]]:
    """Turns one pattern string into spaCy Matcher token patterns (one per phrase choice).

    ``canon`` maps a written word to its canonical form (its lemma), so that
    advocates can write any form of a word in a rule.
    """
    return [_compile_words(words, pattern, lists, attr, canon) for words in expand(pattern)]


def _compile_words(
    parts: List[str], pattern: str, lists: Dict[str, List[str]], attr: str, canon: Any
) -> List[Dict[str, Any]]:
    canon = canon or (lambda w: w)
    tokens: List[Dict[str, Any]] = []
    for part in parts:
        if part.startswith("~"):
            gap = int(part[1:]) if len(part) > 1 else DEFAULT_GAP
            tokens.extend({"OP": "?"} for _ in range(gap))
            continue
        if part == "*":
            tokens.append({})
            continue
        if len(part) > 2 and part.startswith("/") and part.endswith("/"):
            tokens.append({"LOWER": {"REGEX": f"^(?:{part[1:-1]})$"}})
            continue
        optional = part.endswith("?") and len(part) > 1
        if optional:
            part = part[:-1]
        negated = part.startswith("!")
        if negated:
            part = part[1:]
        exact = any(a.startswith("=") for a in part.split("|"))
        words: List[str] = []
        for alternative in (a.lstrip("=") for a in part.split("|")):
            if alternative.isupper() and alternative.replace("_", "").isalpha() and len(alternative) > 1:
                if alternative not in lists:
                    raise PatternError(f"unknown list {alternative} in pattern {pattern!r}")
                words.extend(lists[alternative])
            elif alternative:
                words.append(alternative.lower())
            else:
                raise PatternError(f"empty word in pattern {pattern!r}")
        key = "LOWER" if exact else attr
        if not exact:
            words = [canon(w) for w in words]
        words = sorted(set(words))
        if negated:
            spec: Dict[str, Any] = {key: {"NOT_IN": words}}
        elif len(words) == 1:
            spec = {key: words[0]}
        else:
            spec = {key: {"IN": words}}
        if optional:
            spec["OP"] = "?"
        tokens.append(spec)
    while tokens and tokens[-1].get("OP") == "?" and not [k for k in tokens[-1] if k != "OP"]:
        tokens.pop()  # a trailing gap adds nothing
    while tokens and tokens[0].get("OP") == "?" and not [k for k in tokens[0] if k != "OP"]:
        tokens.pop(0)
    if not any(t.get("OP") != "?" for t in tokens):
        raise PatternError(f"pattern {pattern!r} matches nothing in particular")
    return tokens
