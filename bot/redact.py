"""Removes personal details from text before anything is written (database, logs).

A leaked transcript with a name, a number or an address can put a survivor in
danger. Everything stored passes through ``Redactor.redact``: details are
replaced by typed placeholders (``[PHONE]``, ``[NAME]``, ...). Well-kept
libraries do the hard parts: libphonenumber (``phonenumbers``) for phone
numbers in national and international formats, ``pyap`` for full postal
addresses; the rest are patterns and word lists in ``data/redaction``.
Public hotline numbers (from ``data/hotlines``) are not personal and are kept.
"""
from __future__ import annotations

import ipaddress
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, List, Optional, Set, Tuple

import phonenumbers

from bot import paths

PLACEHOLDERS = ("[PHONE]", "[EMAIL]", "[ADDRESS]", "[ZIP]", "[URL]", "[IP]", "[DATE]", "[CARD]", "[SSN]", "[NAME]")

_DIGIT = re.compile(r"\d")
#: Fewer digits than this are never taken for a phone number (911, a year, a ZIP code).
MIN_PHONE_DIGITS = 7
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", re.UNICODE)
_URL = re.compile(
    r"\b(?:https?://|www\.)[^\s<>\"']+|\b[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.(?:com|org|net|io|co|me|info|us|uk|es|mx|app|dev|ly|gl|gg|tv|be)(?:/[^\s<>\"']*)?",
    re.IGNORECASE,
)
_IPV4 = re.compile(r"\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b")
_IPV6 = re.compile(r"(?<![\w:])[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}(?![\w:])", re.IGNORECASE)
_CARD = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")
_SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b|(?<=\bssn)[\s:#is]*\d{9}\b|(?<=\bsocial security number)[\s:#is]*\d{3}[ -]?\d{2}[ -]?\d{4}", re.IGNORECASE)
_MONTHS = (
    "jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
    "|enero|febrero|marzo|abril|mayo|junio|julio|agosto|septiembre|setiembre|octubre|noviembre|diciembre"
)
_DATE = re.compile(
    r"\b\d{1,2}[/.\-]\d{1,2}[/.\-](?:\d{4}|\d{2})\b"  # 03/14/1992, 14.03.92
    r"|\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}\b"  # 1992-03-14, 1985/09/30
    rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+(?:\d{{4}}|'?\d{{2}})\b"  # March 14 1992
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+|de\s+)?(?:{_MONTHS})\.?,?\s+(?:del?\s+)?(?:\d{{4}}|'?\d{{2}})\b"  # 14th of march 92
    rf"|(?<=\bborn on )(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?(?:\s+of)?\s+(?:{_MONTHS})"
    rf"|(?<=\bborn on )(?:{_MONTHS})\s+\d{{1,2}}(?:st|nd|rd|th)?",
    re.IGNORECASE,
)
_US_STATES = (
    "al|ak|az|ar|ca|co|ct|de|fl|ga|hi|id|il|in|ia|ks|ky|la|me|md|ma|mi|mn|ms|mo|mt|ne|nv|nh|nj|nm|ny|nc|nd|oh|ok|or|pa|ri|sc|sd|tn|tx|ut|vt|va|wa|wv|wi|wy|dc"
)
_ZIP_CONTEXT = re.compile(
    r"(?:\bzip(?:\s*code)?|\bpost\s*code|\bpostal\s*code|\bc[oó]digo postal|\bcp)\b[^\d\n]{0,24}?(\d{5}(?:-\d{4})?|[a-z]{1,2}\d[a-z\d]?\s*\d[a-z]{2})\b",
    re.IGNORECASE,
)
_PO_BOX = re.compile(r"\b(?:p\.?\s?o\.?\s?box|post office box|apartado(?: de correos| postal)?)\s*#?\s*\d+", re.IGNORECASE)
_NEAR_ADDRESS_CODE = re.compile(r"[^\n]{0,40}?\b(\d{5}(?:-\d{4})?|[A-Z]{1,2}\d[A-Z\d]?\s*\d[A-Z]{2})\b")
_ZIP_AFTER_STATE = re.compile(rf"\b(?:{_US_STATES})\.?,?\s+(\d{{5}}(?:-\d{{4}})?)\b", re.IGNORECASE)
_ZIP_PLUS4 = re.compile(r"\b\d{5}-\d{4}\b")
_UK_POSTCODE = re.compile(r"\b(?:[A-Z]{1,2}\d[A-Z\d]?)\s*\d[A-Z]{2}\b")
_UNIT = r"(?:,?\s+(?:apt|apartment|unit|suite|ste|flat|fl|floor|#)\.?\s*#?\s*[\w-]+)?"
_SPANISH_STREET = re.compile(
    r"\b(?:calle|c/|avenida|avda\.?|av\.|paseo|plaza|carrera|cra\.?|colonia|col\.)\s+(?:[\w'áéíóúñ]+\s+){0,3}(?:n[º°o]\.?\s*)?\d{1,5}\w?\b",
    re.IGNORECASE,
)
_INTRO_CUES = re.compile(
    r"\b(?:my name is|my name's|my names|name's|names|i am called|i'm called|im called|call me|they call me|named|"
    r"(?:his|her|their|my (?:ex|husband|wife|boyfriend|girlfriend|partner|bf|gf|son|daughter|friend|sister|brother|mom|dad|abuser)'?s?) name(?:'s| is|s)|"
    r"me llamo|mi nombre es|se llama|soy)\s+",
    re.IGNORECASE,
)
_SELF_CUES = re.compile(r"\b(?:i'm|im|i am|this is|it's|its|hi i'm|hey i'm)\s+", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-zÀ-ÿ][A-Za-zÀ-ÿ'’-]*")
_NOT_A_NAME_AFTER_CUE = {
    "back", "when", "if", "a", "an", "the", "not", "so", "that", "names", "crazy", "stupid", "that", "me",
    "because", "after", "it", "this", "and", "or", "but", "anytime", "later", "now", "tomorrow", "please",
}


_SURNAME = re.compile(r"[ \t]+([A-Z][a-zÀ-ÿ'’-]+)")
_NOT_SURNAMES = {
    "i", "i'm", "im", "he", "she", "they", "we", "you", "it", "my", "his", "her", "their", "the", "a", "and",
    "but", "or", "is", "was", "are", "and", "so", "then", "when", "who", "what", "why", "how", "if", "not",
    "said", "says", "keeps", "kept", "hit", "hits", "and", "from", "to", "at", "in", "on", "y", "que", "es",
}


@dataclass(frozen=True)
class Finding:
    kind: str  # PHONE, EMAIL, ...
    start: int
    end: int


def _read_list(path: Path) -> Set[str]:
    if not path.exists():
        return set()
    lines = path.read_text(encoding="utf-8").splitlines()
    return {line.strip().lower() for line in lines if line.strip() and not line.startswith("#")}


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _luhn(number: str) -> bool:
    digits = [int(d) for d in number][::-1]
    total = sum(d if i % 2 == 0 else (d * 2 - 9 if d * 2 > 9 else d * 2) for i, d in enumerate(digits))
    return total % 10 == 0


class Redactor:
    """Finds and replaces personal details (see the module docstring)."""

    def __init__(
        self,
        first_names: Set[str],
        street_suffixes: Set[str],
        is_english_word: Callable[[str], bool],
        public_numbers: Iterable[str] = (),
        regions: Tuple[str, ...] = ("US", "GB", "ES", "MX"),
    ) -> None:
        self.first_names = first_names
        self.is_english_word = is_english_word
        self.public_numbers = {_digits(n) for n in public_numbers if _digits(n)}
        self.regions = regions
        suffixes = "|".join(sorted((re.escape(s) for s in street_suffixes), key=len, reverse=True))
        self._street = re.compile(
            rf"\b\d{{1,6}}[a-z]?\s+(?:[nsew]\.?\s+)?(?:[A-Za-z0-9'’.-]+\s+){{0,3}}(?:{suffixes})\b\.?{_UNIT}",
            re.IGNORECASE,
        )

    # ------------------------------------------------------------------ finding

    def find(self, text: str) -> List[Finding]:
        found: List[Finding] = []
        add = lambda kind, m, group=0: found.append(Finding(kind, m.start(group), m.end(group)))  # noqa: E731
        for m in _EMAIL.finditer(text):
            add("EMAIL", m)
        for m in _URL.finditer(text):
            if "@" not in text[max(0, m.start() - 1) : m.end()]:
                add("URL", m)
        for m in _IPV6.finditer(text):
            try:
                ipaddress.ip_address(m.group(0).strip(".,;"))
            except ValueError:
                continue
            add("IP", m)
        # Every other pattern needs a digit (phone numbers at least seven):
        # most messages have none, and skip them all.
        digits = len(_DIGIT.findall(text))
        if digits:
            for m in _IPV4.finditer(text):
                add("IP", m)
            for m in _SSN.finditer(text):
                add("SSN", m)
            for m in _CARD.finditer(text):
                number = _digits(m.group(0))
                if 13 <= len(number) <= 19 and _luhn(number):
                    add("CARD", m)
            if digits >= MIN_PHONE_DIGITS:
                found.extend(self._phones(text))
            for m in _DATE.finditer(text):
                add("DATE", m)
            found.extend(self._addresses(text))
            for m in _ZIP_CONTEXT.finditer(text):
                add("ZIP", m, 1)
            for m in _ZIP_AFTER_STATE.finditer(text):
                add("ZIP", m, 1)
            for m in _ZIP_PLUS4.finditer(text):
                add("ZIP", m)
            for m in _UK_POSTCODE.finditer(text):
                add("ZIP", m)
        found.extend(self._names(text))
        return _resolve(found)

    def _phones(self, text: str) -> List[Finding]:
        """Phone numbers: national formats of the first region, any with a country code."""
        found = []
        for index, region in enumerate(self.regions):
            for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.POSSIBLE):
                raw = match.raw_string
                digits = _digits(raw)
                international = raw.lstrip("(").startswith(("+", "00"))
                if digits in self.public_numbers or len(digits) < MIN_PHONE_DIGITS:
                    continue
                if index > 0 and not international and len(digits) < 9:
                    continue  # "2019", "90210": years and ZIP codes are not phone numbers
                found.append(Finding("PHONE", match.start, match.end))
        return found

    def _addresses(self, text: str) -> List[Finding]:
        found = []
        for pattern in (self._street, _SPANISH_STREET, _PO_BOX):
            for m in pattern.finditer(text):
                found.append(Finding("ADDRESS", m.start(), m.end()))
                # a postcode shortly after a street ("Calle Mayor 8, 2º, 28013 Madrid")
                code = _NEAR_ADDRESS_CODE.match(text, m.end())
                if code:
                    found.append(Finding("ZIP", code.start(1), code.end(1)))
        if any(ch.isdigit() for ch in text):
            for country in ("US", "GB", "CA"):
                for address in _pyap().parse(text, country=country):
                    start = text.find(address.full_address)
                    if start >= 0:
                        found.append(Finding("ADDRESS", start, start + len(address.full_address)))
        return found

    def _names(self, text: str) -> List[Finding]:
        found: List[Finding] = []
        for cue in _INTRO_CUES.finditer(text):
            span = self._name_at(text, cue.end(), strict=cue.group(0).lower().strip() in ("soy", "call me", "named"))
            if span:
                found.append(Finding("NAME", *span))
        for cue in _SELF_CUES.finditer(text):
            span = self._name_at(text, cue.end(), strict=True)
            if span:
                found.append(Finding("NAME", *span))
        for m in _WORD.finditer(text):
            word = m.group(0)
            lower = _plain(word)
            if lower not in self.first_names:
                continue
            capitalised = word[0].isupper() and not word.isupper()
            at_sentence_start = not text[: m.start()].strip() or text[: m.start()].rstrip()[-1:] in ".!?\n"
            ordinary = self.is_english_word(lower)
            if (capitalised and not (ordinary and at_sentence_start)) or (not ordinary and len(lower) > 2):
                end = self._surname_end(text, m.end())
                found.append(Finding("NAME", m.start(), end))
        return found

    def _name_at(self, text: str, position: int, strict: bool) -> Optional[Tuple[int, int]]:
        m = _WORD.match(text, position)
        if not m:
            return None
        word = m.group(0)
        lower = _plain(word)
        if lower in _NOT_A_NAME_AFTER_CUE:
            return None
        if strict and not (lower in self.first_names or (word[0].isupper() and not self.is_english_word(lower))):
            return None
        if not strict and self.is_english_word(lower) and lower not in self.first_names and not word[0].isupper():
            return None
        return m.start(), self._surname_end(text, m.end())

    def _surname_end(self, text: str, end: int) -> int:
        """Extends a name over a following capitalised word ("Rosa Martinez", "Tyler Brooks")."""
        m = _SURNAME.match(text, end)
        if m and m.group(1).lower() not in _NOT_SURNAMES:
            return m.end()
        return end

    # ------------------------------------------------------------------ replacing

    def redact(self, text: str) -> str:
        """``text`` with every personal detail replaced by its placeholder."""
        if not text:
            return text
        findings = self.find(text)
        for finding in sorted(findings, key=lambda f: f.start, reverse=True):
            text = text[: finding.start] + f"[{finding.kind}]" + text[finding.end :]
        return text

    def redact_value(self, value: Any) -> Any:
        """Redacts every string inside a JSON-like value (dicts, lists)."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            return {k: self.redact_value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.redact_value(v) for v in value]
        return value


@lru_cache(maxsize=8192)
def _plain(word: str) -> str:
    """Lowercase, no accents, no possessive ("Mike's" -> "mike"); remembered (words repeat)."""
    decomposed = unicodedata.normalize("NFD", word.lower().replace("’", "'"))
    plain = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
    if plain.endswith("'s"):
        plain = plain[:-2]
    return plain.strip("'-")


def _resolve(findings: List[Finding]) -> List[Finding]:
    """Merges overlapping findings (the longest wins), so placeholders never nest."""
    merged: List[Finding] = []
    rank = {kind: i for i, kind in enumerate(("EMAIL", "URL", "IP", "SSN", "CARD", "ZIP", "DATE", "ADDRESS", "PHONE", "NAME"))}
    for finding in sorted(findings, key=lambda f: (f.start, -(f.end - f.start), rank.get(f.kind, 99))):
        if merged and finding.start < merged[-1].end:
            last = merged[-1]
            if finding.end > last.end:
                merged[-1] = Finding(last.kind, last.start, finding.end)
            continue
        merged.append(finding)
    return merged


@lru_cache(maxsize=1)
def _pyap() -> Any:
    import pyap

    return pyap


_ALWAYS_ORDINARY = {
    "january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
    "november", "december", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday",
    "dawn", "frank", "bliss", "honey", "baby", "babe", "love", "sunny", "major", "chance", "christian",
}
COMMON_WORD_LOG_PROBABILITY = -12.5


def common_words() -> Callable[[str], bool]:
    """A test for "is an everyday English word" (hope, will, may, sad), from spaCy's word frequencies.

    Only the words above the threshold are kept (tens of thousands), so the
    million-word table is read once at start-up and then dropped.
    """
    import gzip
    import json

    import spacy_lookups_data

    path = Path(spacy_lookups_data.__file__).parent / "data" / "en_lexeme_prob.json.gz"
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        probabilities = json.load(handle)
    common = {w for w, p in probabilities.items() if p > COMMON_WORD_LOG_PROBABILITY} | _ALWAYS_ORDINARY
    return common.__contains__


#: Exercises every lazily loaded part of the redaction once (see default_redactor).
WARM_UP_TEXT = "call me on 07700 900123 or write to 12 High Street, Springfield, IL 62701"


@lru_cache(maxsize=1)
def default_redactor() -> Redactor:
    """The redactor for ``data/redaction`` and the hotline directory, built once per process."""
    from bot.hotlines import regions

    directory = paths.data_dir() / "redaction"
    public = [
        resource.get(key)
        for region in regions().values()
        for resource in region.resources.values()
        for key in ("phone", "sms")
        if resource.get(key)
    ]
    first_names = _read_list(directory / "first_names.txt")
    redactor = Redactor(
        first_names=first_names,
        street_suffixes=_read_list(directory / "street_suffixes.txt"),
        is_english_word=common_words(),
        public_numbers=public,
    )
    # The address parser's import and the phone number metadata load on first
    # use (0.2 s): now, not while the first visitor who types a digit waits.
    redactor.redact(WARM_UP_TEXT)
    return redactor


def redact(text: str) -> str:
    return default_redactor().redact(text)
