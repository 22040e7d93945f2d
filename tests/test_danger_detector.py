"""The danger detector, on its own: every category in both languages, and the hard negatives.

Built on a blank spaCy vocabulary and the lookup tables: no model, milliseconds per message.
"""
from __future__ import annotations

import collections
from pathlib import Path
from typing import Any, Dict, List

import pytest

from bot.danger import load_detector
from bot.danger.detector import build_detector
from bot.danger.patterns import PatternError, compile_pattern, expand
from bot.hotlines import CRISIS_CATEGORIES

detector = load_detector()

# (text, category, language) written for these tests: a few per category and language.
EXAMPLES = [
    ("hes outside banging on the door", "imminent_danger", "en"),
    ("she's in the kitchen screaming and i'm hiding in the closet", "imminent_danger", "en"),
    ("está afuera gritando y tengo miedo de que entre", "imminent_danger", "es"),
    ("he said he's gonna kil me when he gets home", "threat", "en"),
    ("my ex keeps texting that i'll be dead if i go to the police", "threat", "en"),
    ("me amenazó con matarme si lo dejo", "threat", "es"),
    ("hes got a gun", "weapon", "en"),
    ("she grabbed a knife and pointed it at me", "weapon", "en"),
    ("sacó una pistola y me apuntó", "weapon", "es"),
    ("he punched me in the face last night", "recent_violence", "en"),
    ("my girlfriend slapped me twice today", "recent_violence", "en"),
    ("mi novio me pegó anoche", "recent_violence", "es"),
    ("she choaked me", "strangulation", "en"),
    ("he strangled me years ago and i still think about it", "strangulation", "en"),
    ("me ahorcó hasta que no podía respirar", "strangulation", "es"),
    ("i dont want to be here anymore", "suicide_selfharm", "en"),
    ("kms", "suicide_selfharm", "en"),
    ("thinking about how to unalive myself", "suicide_selfharm", "en"),
    ("ya no quiero vivir", "suicide_selfharm", "es"),
    ("he kicked the dog so hard it cant walk", "child_or_pet", "en"),
    ("my husband hit my son tonight", "child_or_pet", "en"),
    ("le pegó a mi hija con el cinturón", "child_or_pet", "es"),
    ("i found an airtag taped under my car", "stalking", "en"),
    ("my ex keeps showing up at my job", "stalking", "en"),
    ("mi ex me sigue a todos lados", "stalking", "es"),
    ("he locked me in the bedroom and took my phone", "confinement", "en"),
    ("im not allowed to leave the house", "confinement", "en"),
    ("me encerró en el baño", "confinement", "es"),
    ("theres so much blood, i think my nose is broken", "medical", "en"),
    ("i passed out after he hit me and my head hurts", "medical", "en"),
    ("estoy sangrando mucho", "medical", "es"),
    ("please help me now", "plea", "en"),
    ("SOS", "plea", "en"),
    ("llamen a la policía por favor", "plea", "es"),
    ("he raped me tonight", "sexual_violence", "en"),
    ("she forced me to have sex after i said no", "sexual_violence", "en"),
    ("me violó anoche", "sexual_violence", "es"),
]

NOT_A_CRISIS = [
    "why do i miss someone who hurt me",
    "why do i still love my abusive ex",
    "he used to hit me years ago, i'm safe now, why do i still miss him",
    "this breakup is killing me",
    "i'm dead tired of crying over her",
    "how do i kill time at night when the missing gets bad",
    "i choked up when i saw our old photos",
    "she stabbed me in the back by lying to our friends",
    "i'm not in any danger, i just want to understand",
    "i beat myself up for staying so long",
    "i'd die for one more hug from him lol",
    "my heart is broken, will it heal",
    "i feel trapped in my own head",
    "me muero de ganas de verlo",
    "esta ruptura me está matando",
]


@pytest.mark.parametrize("text,category,language", EXAMPLES)
def test_each_category_is_recognised_in_english_and_spanish(text: str, category: str, language: str) -> None:
    detection = detector.detect(text)
    assert detection is not None, text
    assert category in detection.categories
    assert detection.language == language or language == "en"


def test_every_category_has_english_and_spanish_examples_above() -> None:
    covered = {(category, language) for _, category, language in EXAMPLES}
    for category in CRISIS_CATEGORIES:
        assert {(category, "en"), (category, "es")} <= covered, category


@pytest.mark.parametrize("text", NOT_A_CRISIS)
def test_reflective_and_figurative_talk_is_not_a_crisis(text: str) -> None:
    assert detector.detect(text) is None, detector.explain(text).hits


@pytest.mark.parametrize(
    "text,expected",
    [
        ("he hit me last night", True),
        ("he used to hit me years ago", False),
        ("he used to hit me and last night he did it again", True),
        ("he didnt hit me", False),
        ("i dont know what to do. he hit me", True),
        ("he choked me once, years ago", True),  # strangulation counts at any time
    ],
)
def test_tense_and_negation_decide_where_they_matter(text: str, expected: bool) -> None:
    assert (detector.detect(text) is not None) == expected


def test_suicide_comes_first_when_a_message_has_several_dangers() -> None:
    detection = detector.detect("he has a gun and honestly i want to die")
    assert detection.category == "suicide_selfharm"
    assert {"weapon", "suicide_selfharm"} <= set(detection.categories)


def test_spanish_detections_are_marked_spanish() -> None:
    assert detector.detect("me quiere matar").language == "es"
    assert detector.detect("he wants to kill me").language == "en"


def test_spanish_threat_and_spanish_suicide_are_told_apart() -> None:
    assert detector.detect("me quiere matar").category == "threat"
    assert detector.detect("me quiero matar").category == "suicide_selfharm"


# ---------------------------------------------------------------- the crisis test file


def test_the_crisis_file_has_enough_phrasings(crisis_cases: Dict[str, List[Dict[str, Any]]]) -> None:
    crisis, negatives = crisis_cases["crisis"], crisis_cases["no_crisis"]
    assert len(crisis) >= 200 and len(negatives) >= 100
    per = collections.Counter((c["category"], c["lang"]) for c in crisis)
    for category in CRISIS_CATEGORIES:
        assert per[(category, "en")] >= 5 and per[(category, "es")] >= 3, category


def test_crisis_recall_is_complete_on_the_crisis_file(crisis_cases: Dict[str, List[Dict[str, Any]]]) -> None:
    missed = [c["text"] for c in crisis_cases["crisis"] if detector.detect(c["text"]) is None]
    assert missed == []


def test_hard_negatives_rarely_hand_off(crisis_cases: Dict[str, List[Dict[str, Any]]]) -> None:
    negatives = crisis_cases["no_crisis"]
    false = [c["text"] for c in negatives if detector.detect(c["text"]) is not None]
    assert len(false) / len(negatives) <= 0.05, false


# ---------------------------------------------------------------- the pattern language


def test_phrase_groups_expand_into_every_choice() -> None:
    assert expand("end (it all|my life)") == [["end", "it", "all"], ["end", "my", "life"]]
    assert expand("(please)? help") == [["please", "help"], ["help"]]


def test_unknown_lists_and_broken_groups_are_refused_clearly() -> None:
    with pytest.raises(PatternError, match="unknown list"):
        compile_pattern("NOPE me", {}, "NORM")
    with pytest.raises(PatternError, match="unclosed"):
        expand("end (it all")


def test_a_rule_added_by_an_advocate_takes_effect(tmp_path: Path) -> None:
    from tests.conftest import PROJECT
    import shutil

    shutil.copytree(PROJECT / "data/danger", tmp_path / "danger")
    extra = (
        "\n  - id: test_only_rule\n    category: plea\n    catches: a test phrase\n"
        '    patterns:\n      - "purple (elephant|giraffe) alarm"\n'
    )
    path = tmp_path / "danger/en.yml"
    path.write_text(path.read_text() + extra)
    custom = build_detector(tmp_path / "danger")
    assert custom.detect("the purple giraffe alarm went off").category == "plea"
    assert detector.detect("the purple giraffe alarm went off") is None


def test_every_rule_says_what_it_catches() -> None:
    for key, rule in detector.rules.items():
        assert rule.catches.strip(), key
        assert rule.category in CRISIS_CATEGORIES, key


def test_every_pattern_passes_spacys_schema_check() -> None:
    """Servers skip spaCy's pattern validation at start-up (seconds); it runs here instead."""
    checked = build_detector(validate=True)
    assert checked.validate and checked.rules.keys() == detector.rules.keys()


def _dev_texts() -> List[str]:
    from bot.bench.loadgen import load_questions

    return load_questions()


def test_indexed_patterns_find_what_running_every_pattern_finds() -> None:
    """The anchor index only skips patterns that cannot match: the same matches as trying them all."""
    detector = load_detector()
    everything = [entry for entries in detector.anchors.values() for entry in entries] + list(detector.always)
    unique = list({id(e): e for e in everything}.values())
    for text in _dev_texts():
        words, _ = detector.normaliser.tokens(text)
        doc = detector.doc(words[:300])
        brute = sorted(m for _, matcher in unique for m in matcher(doc))
        assert sorted(detector._matches(doc)) == brute, text


def test_a_message_tries_few_of_the_patterns() -> None:
    """Patterns hang on uncommon words: anchored on "not" or "me", a message tried 195 of them."""
    detector = load_detector()
    tried = []
    for text in _dev_texts():
        words, _ = detector.normaliser.tokens(text)
        doc = detector.doc(words[:300])
        present = {(attr, getattr(t, name)) for t in doc for attr, name in
                   (("NORM", "norm_"), ("LEMMA", "lemma_"), ("LOWER", "lower_"))}
        tried.append(len({id(e) for v in present for e in detector.anchors.get(v, ())}))
    assert sum(tried) / len(tried) < 80, sum(tried) / len(tried)
