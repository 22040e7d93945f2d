"""Turns what visitors really type into canonical words before matching.

Crisis messages are typed in a hurry: lowercase, no apostrophes, misspelt,
padded with emoji or stretched ("pleeease"). The detector matches rules on
canonical lemmas, so this module folds all of that first. The word lists
(misspellings, slang, emoji) are data in ``data/danger/spelling.yml``.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Container, Dict, List, Optional, Set, Tuple

#: Characters that hide words without showing anything (zero-width, soft hyphen).
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad\u180e"), None)
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'", "\u00b4": "'", "\u02bc": "'"})
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*", re.UNICODE)
_STRETCH = re.compile(r"([^\W\d_])\1{2,}", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?;\n\u3002]")


def strip_accents(text: str) -> str:
    """"está" -> "esta": Spanish is often typed without accents."""
    decomposed = unicodedata.normalize("NFD", text)
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")


@dataclass
class Normaliser:
    """Maps raw text to a list of canonical words (lowercase, spelled out)."""

    replacements: Dict[str, str]  # single word -> one or more words ("kms" -> "kill myself")
    symbols: Dict[str, str]  # emoji or symbol -> word ("🔫" -> "gun")
    vocabulary: Container[str]  # known words, used to undo stretching ("killll" -> "kill")

    def words(self, text: str) -> List[str]:
        """The message as canonical lowercase words: accents, punctuation and emoji removed."""
        return self.tokens(text)[0]

    def tokens(self, text: str) -> Tuple[List[str], List[int]]:
        """Canonical words and, for each, the number of the sentence it is in.

        Sentences matter for negation: in "i dont know. he hit me" the "not"
        belongs to another sentence and must not cancel "hit me".
        """
        text = unicodedata.normalize("NFKC", text).translate(_INVISIBLE).translate(_APOSTROPHES)
        for symbol, word in self.symbols.items():
            if symbol in text:
                text = text.replace(symbol, f" {word} ")
        words: List[str] = []
        sentences: List[int] = []
        sentence = 0
        last_end = 0
        lowered = strip_accents(text.lower())
        for match in _WORD.finditer(lowered):
            if _SENTENCE_END.search(lowered, last_end, match.start()):
                sentence += 1
            last_end = match.end()
            word = self._unstretch(match.group(0))
            replaced = self.replacements.get(word)
            if replaced is None and word.endswith("'s"):
                replaced = word[:-2]  # "mom's" -> "mom"
            for part in (replaced or word).split():
                words.append(part)
                sentences.append(sentence)
        return words, sentences

    def _unstretch(self, word: str) -> str:
        """"pleeease" -> "please", "killl" -> "kill", "sooo" -> "so"."""
        if not _STRETCH.search(word):
            return word
        double = _STRETCH.sub(r"\1\1", word)
        if double in self.vocabulary or double in self.replacements:
            return double
        return _STRETCH.sub(r"\1", word)


def build_normaliser(spelling: Dict[str, object], vocabulary: Container[str]) -> Normaliser:
    replacements: Dict[str, str] = {}
    for group in ("misspellings", "slang", "contractions"):
        for wrong, right in (spelling.get(group) or {}).items():
            replacements[str(wrong).lower()] = str(right).lower()
    symbols = {str(k): str(v) for k, v in (spelling.get("symbols") or {}).items()}
    return Normaliser(replacements=replacements, symbols=symbols, vocabulary=vocabulary)


def first_language_guess(words: List[str], spanish_markers: Set[str]) -> Optional[str]:
    """"es" when the words look Spanish, else "en" (used to reply in the visitor's language)."""
    if not words:
        return None
    hits = sum(strip_accents(w) in spanish_markers for w in words)
    return "es" if hits >= max(1, len(words) // 5) else "en"
