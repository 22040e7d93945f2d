"""Decides whether a message signals danger, and which kind.

The rules (``data/danger/<language>.yml``) are matched with spaCy's Matcher on
canonical lemmas: English on ``NORM``, Spanish on ``LEMMA`` (accents
stripped). Two kinds of context decide what a match means: a "now" rule (a
slap, a threat) does not fire when the message says the abuse has ended
("used to", "years ago", "we divorced") unless it also says it is recent
("last night", "again"); an "any time" rule (strangulation, suicide) always
fires. A negation just before a "negatable" match ("i'm not in danger")
cancels it.
"""
from __future__ import annotations

import gzip
import json
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import spacy
import spacy_lookups_data
from spacy.lang.en.stop_words import STOP_WORDS as EN_STOP_WORDS
from spacy.lang.es.stop_words import STOP_WORDS as ES_STOP_WORDS
from spacy.lookups import load_lookups
from spacy.matcher import Matcher
from spacy.tokens import Doc

from bot import paths
from bot.danger.normalise import Normaliser, build_normaliser, strip_accents
from bot.danger.patterns import (
    PatternError,
    Rule,
    RuleSet,
    compile_pattern,
    load_rule_sets,
    load_spelling,
)

#: The order in which categories win when a message hits several: the one
#: whose resources must come first. Kept here because it is policy, not wording.
CATEGORY_PRIORITY: Tuple[str, ...] = (
    "suicide_selfharm",
    "medical",
    "strangulation",
    "weapon",
    "imminent_danger",
    "confinement",
    "sexual_violence",
    "child_or_pet",
    "threat",
    "recent_violence",
    "stalking",
    "plea",
)

ATTR = {"en": "NORM", "es": "LEMMA"}
WINDOW = 300  # words per matching window on very long messages
OVERLAP = 40
NEGATION_REACH = 4  # words before a match where a "not" cancels a negatable rule
_COMMON_WORDS = frozenset(EN_STOP_WORDS) | frozenset(ES_STOP_WORDS)  # poor anchors (see _anchor_cost)
EXCEPT = ":except"
FIGURES = ":figures"
_CLITICS = ("selo", "sela", "melo", "mela", "telo", "tela", "nos", "los", "las", "les", "me", "te", "se", "lo", "la", "le")


@dataclass(frozen=True)
class Hit:
    rule: Rule
    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Detection:
    """A message that needs the handoff."""

    category: str
    language: str
    rule_id: str
    categories: Tuple[str, ...]
    rule_ids: Tuple[str, ...]


@dataclass
class Explanation:
    """Everything the detector saw in a message, for tests, the flow book and debugging."""

    words: List[str]
    hits: List[Hit] = field(default_factory=list)
    suppressed: List[Tuple[Hit, str]] = field(default_factory=list)
    context: Dict[str, bool] = field(default_factory=dict)
    figures: List[str] = field(default_factory=list)  # figures of speech found

    @property
    def judged_safe(self) -> bool:
        """True when the rules saw danger words and judged them harmless.

        That is: a figure of speech ("this breakup is killing me"), a match that
        was negated, in the past or excepted, or a message about the past
        with nothing recent. The classifier's guess does not overrule that.
        """
        if self.hits:
            return False
        past_only = self.context.get("past", False) and not self.context.get("recent", False)
        return bool(self.figures or self.suppressed or past_only)


class DangerDetector:
    """Matches the advocate-written danger rules against a message."""

    def __init__(
        self,
        rule_sets: List[RuleSet],
        normaliser: Normaliser,
        en_lemma: Callable[[str], str],
        es_lemma: Callable[[str], str],
        validate: bool = False,
    ) -> None:
        # spaCy checks every pattern against its schema when asked to: seconds
        # at start-up for this rule book. The tests build it once with the
        # checks on (tests/test_danger_detector.py); servers skip them.
        self.validate = validate
        self.normaliser = normaliser
        self._lemma = {"en": en_lemma, "es": es_lemma}
        self._recent: "OrderedDict[str, Explanation]" = OrderedDict()
        self.vocab = spacy.blank("en").vocab
        # One small Matcher per pattern, run only when all the words it needs are
        # in the message (see _matches).
        self.anchors: Dict[Tuple[str, str], List[Any]] = {}
        self.always: List[Any] = []
        self.rules: Dict[str, Rule] = {}
        self.negation: Dict[str, Set[str]] = {}
        self.context_keys: Dict[str, str] = {}
        for rule_set in rule_sets:
            self._add(rule_set)

    def _add(self, rule_set: RuleSet) -> None:
        try:
            self._add_rules(rule_set)
        except PatternError as exc:
            raise PatternError(f"{rule_set.file}: {exc}") from exc

    def _add_rules(self, rule_set: RuleSet) -> None:
        language = rule_set.language
        attr = ATTR[language]
        canon = self._lemma[language]
        self.negation[language] = {canon(w) for w in rule_set.negation}
        for rule in rule_set.rules:
            key = f"{language}:{rule.id}"
            if key in self.rules:
                raise ValueError(f"{rule_set.file}: duplicate rule id {rule.id}")
            self.rules[key] = rule
            compile_ = lambda ps: [t for p in ps for t in compile_pattern(p, rule_set.lists, attr, canon)]  # noqa: E731
            self._add_group(key, compile_(rule.patterns))
            if rule.excepts:
                self._add_group(f"{key}{EXCEPT}", compile_(rule.excepts))
        compile_all = lambda ps: [t for p in ps for t in compile_pattern(p, rule_set.lists, attr, canon)]  # noqa: E731
        if rule_set.figures:
            self._add_group(f"{language}{FIGURES}", compile_all(rule_set.figures))
        for name, patterns in rule_set.context.items():
            key = f"{language}:context:{name}"
            self.context_keys[key] = name
            if patterns:
                self._add_group(key, compile_all(patterns))

    def _add_group(self, key: str, patterns: List[List[Dict[str, Any]]]) -> None:
        for pattern in patterns:
            matcher = Matcher(self.vocab, validate=self.validate)
            matcher.add(key, [pattern])
            required = _required(pattern)
            entry = (required, matcher)
            if not required:
                self.always.append(entry)
                continue
            anchor = min(required, key=_anchor_cost)
            for value in anchor:
                self.anchors.setdefault(value, []).append(entry)

    def _matches(self, doc: Doc) -> List[Tuple[int, int, int]]:
        """Every match of every pattern whose required words all occur in ``doc``.

        Each pattern has its own small Matcher, indexed by one of its required
        words; a message runs only the patterns it could possibly match, so
        the cost stays proportional to the message, not to the rule book.
        """
        present: Set[Tuple[str, str]] = set()
        for token in doc:
            present.add(("NORM", token.norm_))
            present.add(("LEMMA", token.lemma_))
            present.add(("LOWER", token.lower_))
        candidates: Dict[int, Any] = {}
        for value in present:
            for entry in self.anchors.get(value, ()):
                candidates[id(entry)] = entry
        matches: List[Tuple[int, int, int]] = []
        for required, matcher in (*self.always, *candidates.values()):
            if all(not present.isdisjoint(values) for values in required):
                matches.extend(matcher(doc))
        return matches

    def doc(self, words: List[str]) -> Doc:
        """A spaCy Doc of canonical words: English lemma in NORM, Spanish lemma in LEMMA."""
        doc = Doc(self.vocab, words=words)
        en, es = self._lemma["en"], self._lemma["es"]
        for token in doc:
            token.norm_ = en(token.text)
            token.lemma_ = es(token.text)
        return doc

    def explain(self, text: str) -> Explanation:
        """What the rules see in ``text`` (the last few answers are remembered:
        the classifier and the crisis override ask about the same message)."""
        text = text or ""
        cached = self._recent.get(text)
        if cached is not None:
            return cached
        explanation = self._explain(text)
        self._recent[text] = explanation
        while len(self._recent) > 64:
            self._recent.popitem(last=False)
        return explanation

    def _explain(self, text: str) -> Explanation:
        words, sentences = self.normaliser.tokens(text)
        explanation = Explanation(words=words)
        start = 0
        while True:
            self._explain_window(words[start : start + WINDOW], sentences[start : start + WINDOW], start, explanation)
            if start + WINDOW >= len(words):
                break
            start += WINDOW - OVERLAP
        return explanation

    def _explain_window(self, words: List[str], sentences: List[int], offset: int, out: Explanation) -> None:
        if not words:
            return
        doc = self.doc(words)
        matches = self._matches(doc)
        context: Dict[str, bool] = {}
        excepted: Dict[str, List[Tuple[int, int]]] = {}
        for match_id, start, end in matches:
            key = self.vocab.strings[match_id]
            if key in self.context_keys:
                context[self.context_keys[key]] = True
            elif key.endswith(EXCEPT):
                excepted.setdefault(key[: -len(EXCEPT)], []).append((start, end))
            elif key.endswith(FIGURES):
                excepted.setdefault(key, []).append((start, end))
                out.figures.append(doc[start:end].text)
        for name, value in context.items():
            out.context[name] = out.context.get(name, False) or value
        hit_keys: Set[Tuple[str, int]] = set()
        suppressed_keys: Set[Tuple[str, int, str]] = set()
        for match_id, start, end in matches:
            key = self.vocab.strings[match_id]
            rule = self.rules.get(key)
            if rule is None or (key, start) in hit_keys:
                continue
            hit = Hit(rule=rule, start=offset + start, end=offset + end, text=doc[start:end].text)
            figures = excepted.get(key, []) + excepted.get(f"{rule.language}{FIGURES}", [])
            reason = self._suppressed_because(rule, doc, sentences, start, end, context, figures)
            if not reason:
                hit_keys.add((key, start))
                out.hits.append(hit)
            elif (key, start, reason) not in suppressed_keys:
                suppressed_keys.add((key, start, reason))
                out.suppressed.append((hit, reason))

    def _suppressed_because(
        self,
        rule: Rule,
        doc: Doc,
        sentences: List[int],
        start: int,
        end: int,
        context: Dict[str, bool],
        excepted: List[Tuple[int, int]],
    ) -> str:
        if rule.whole and (start != 0 or end != len(doc)):
            return "not the whole message"
        if any(s < end and start < e for s, e in excepted):
            return "figure of speech"
        if rule.negatable:
            attr = "norm_" if rule.language == "en" else "lemma_"
            before = doc[max(0, start - NEGATION_REACH) : start]
            if any(
                getattr(t, attr) in self.negation[rule.language] and sentences[t.i] == sentences[start]
                for t in before
            ):
                return "negated"
        for name in rule.unless:
            if context.get(name) and not context.get("recent"):
                return f"{name} (and nothing recent)"
        return ""

    def detect(self, text: str) -> Optional[Detection]:
        """The crisis in ``text``, or None when there is none."""
        hits = self.explain(text).hits
        if not hits:
            return None
        categories = sorted({h.rule.category for h in hits}, key=_priority)
        best = min(hits, key=lambda h: (_priority(h.rule.category), h.start))
        return Detection(
            category=categories[0],
            language=best.rule.language,
            rule_id=best.rule.id,
            categories=tuple(categories),
            rule_ids=tuple(sorted({h.rule.id for h in hits})),
        )


def _anchor_cost(values: Set[Tuple[str, str]]) -> Tuple[int, int]:
    """How often a required word is likely to be in a message: common words first, then alternatives.

    A pattern is indexed by one of the words it cannot do without; any one of
    them gives the same matches, but the rarer it is, the fewer patterns a
    message has to try. Anchored on the word with the fewest alternatives,
    a pattern often hung on "not", "me" or "my": a dev-set message tried 195
    patterns to match 2. With common words (spaCy's stop words) avoided, 41.
    """
    return sum(value in _COMMON_WORDS for _, value in values), len(values)


def _required(pattern: List[Dict[str, Any]]) -> List[Set[Tuple[str, str]]]:
    """For each word a pattern cannot do without, the set of values that word may take."""
    required = []
    for spec in pattern:
        if spec.get("OP") in ("?", "*"):
            continue
        for attr in ("NORM", "LEMMA", "LOWER"):
            value = spec.get(attr)
            if isinstance(value, str):
                required.append({(attr, value)})
            elif isinstance(value, dict) and "IN" in value:
                required.append({(attr, v) for v in value["IN"]})
    return required


def _priority(category: str) -> int:
    try:
        return CATEGORY_PRIORITY.index(category)
    except ValueError:
        return len(CATEGORY_PRIORITY)


class _Known:
    """Word membership over a spaCy lookup table (keys are stored hashed)."""

    def __init__(self, table: Any, extra: Set[str]) -> None:
        self.table = table
        self.extra = extra

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and (word in self.extra or word in self.table)


def english_lemmatiser() -> Tuple[Callable[[str], str], _Known]:
    """The lookup lemmatiser of spacy-lookups-data, with a fallback for forms it lacks."""
    table = load_lookups("en", ["lemma_lookup"]).get_table("lemma_lookup")
    known = set(table.values())

    @lru_cache(maxsize=50_000)
    def lemma(word: str) -> str:
        found = table.get(word)
        if found:
            return found
        if word in known:
            return word
        for suffix in ("ing", "ed", "es", "s"):
            if word.endswith(suffix) and len(word) > len(suffix) + 2:
                stem = word[: -len(suffix)]
                for candidate in (stem, stem + "e", stem[:-1] if stem[-1:] == stem[-2:-1] else None):
                    if candidate and candidate in known:
                        return candidate
        return word

    return lemma, _Known(table, known)


def _rule_words(rule_sets: List[RuleSet], language: str) -> Set[str]:
    """Every plain word the rules of ``language`` use (to keep only the lemmas that matter)."""
    words: Set[str] = set()
    for rule_set in rule_sets:
        if rule_set.language != language:
            continue
        texts = [p for r in rule_set.rules for p in (*r.patterns, *r.excepts)]
        texts += [p for ps in rule_set.context.values() for p in ps] + rule_set.figures
        for text in texts:
            for token in text.replace("(", " ").replace(")", " ").split():
                words.update(w.strip("=!?").lower() for w in token.split("|"))
        for values in rule_set.lists.values():
            words.update(values)
        words.update(rule_set.negation)
    return words


def spanish_lemmatiser(rule_words: Set[str]) -> Callable[[str], str]:
    """Spanish lookup lemmas, accents stripped, clitics removed ("matarme" -> "matar").

    Visitors often type without accents ("golpeo" for "golpeó"), so the table is
    re-keyed without accents; only the forms of lemmas that the rules use are
    kept, which keeps start-up fast and memory small.
    """
    path = Path(spacy_lookups_data.__file__).parent / "data" / "es_lemma_lookup.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        table: Dict[str, str] = json.load(handle)
    plain_lemma = {v: strip_accents(v) for v in set(table.values())}
    wanted = {strip_accents(table.get(w, w)) for w in rule_words}
    forms: Dict[str, str] = {}
    for form, lemma in table.items():
        if plain_lemma[lemma] in wanted:
            forms.setdefault(strip_accents(form), plain_lemma[lemma])

    @lru_cache(maxsize=50_000)
    def lemma(word: str) -> str:
        plain = strip_accents(word)
        found = forms.get(plain)
        if found is None:
            for clitic in _CLITICS:
                if plain.endswith(clitic) and len(plain) > len(clitic) + 3:
                    stem = plain[: -len(clitic)]
                    if stem.endswith(("ar", "er", "ir", "ando", "iendo", "endo")):
                        found = forms.get(stem) or stem
                        break
        return found or plain

    return lemma


def build_detector(directory: Optional[Path] = None, validate: bool = False) -> DangerDetector:
    """A detector over the rules in ``data/danger`` (or ``directory``)."""
    rule_sets = load_rule_sets(directory)
    en_lemma, vocabulary = english_lemmatiser()
    es_lemma = spanish_lemmatiser(_rule_words(rule_sets, "es"))
    normaliser = build_normaliser(load_spelling(directory), vocabulary)
    return DangerDetector(rule_sets, normaliser, en_lemma, es_lemma, validate=validate)


@lru_cache(maxsize=2)
def _cached(directory: str) -> DangerDetector:
    return build_detector(Path(directory))


def load_detector(directory: Optional[Path] = None) -> DangerDetector:
    """The detector for ``data/danger``, built once per process."""
    return _cached(str(directory or paths.danger_dir()))


def time_per_message(detector: DangerDetector, texts: List[str], rounds: int = 5) -> float:
    """Seconds per message, best of ``rounds`` (for the benchmark)."""
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for text in texts:
            detector.detect(text)
        best = min(best, (time.perf_counter() - started) / max(len(texts), 1))
    return best
