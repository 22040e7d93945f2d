"""Property-based tests: case, punctuation, spacing, emoji and surrounding text never hide a crisis."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.danger import load_detector

detector = load_detector()

CRISIS_PHRASES = [
    "he has a gun",
    "hes outside banging on the door",
    "i want to kill myself",
    "i dont want to be here anymore",
    "he choked me",
    "she hit me last night",
    "he locked me in the bathroom",
    "i found an airtag in my bag",
    "my husband threatened to kill me",
    "he raped me tonight",
    "theres blood coming from my head",
    "please help me now",
    "he threw my cat across the room",
    "me quiere matar",
    "quiero morirme",
    "no me deja salir de la casa",
]
# Neutral text that says nothing about time or negation.
SURROUNDINGS = [
    "ok so",
    "sorry for typing so fast",
    "i read your article earlier",
    "hi",
    "idk who else to tell",
    "this is my first time here",
    "hola",
    "please",
]
EMOJI = ["😭", "😰", "🙏", "💔", "😳", "🥺", "‼️", "😢"]
PUNCTUATION = [".", "!", "?", ",", "...", "!!", "?!", ";", "-", "*", "~"]


def words_of(phrase: str) -> list:
    return phrase.split(" ")


@st.composite
def disguised(draw: st.DrawFn) -> tuple:
    phrase = draw(st.sampled_from(CRISIS_PHRASES))
    words = words_of(phrase)
    out = []
    for word in words:
        style = draw(st.sampled_from(["lower", "upper", "title", "random"]))
        if style == "upper":
            word = word.upper()
        elif style == "title":
            word = word.title()
        elif style == "random":
            word = "".join(c.upper() if draw(st.booleans()) else c for c in word)
        out.append(word)
        if draw(st.integers(0, 4)) == 0:
            out.append(draw(st.sampled_from(EMOJI)))
        spacing = draw(st.sampled_from([" ", "  ", "\t", " \n ", "   "]))
        out.append(spacing)
    text = "".join(out).strip()
    if draw(st.booleans()):
        text += draw(st.sampled_from(PUNCTUATION + EMOJI))
    if draw(st.booleans()):
        text = draw(st.sampled_from(SURROUNDINGS)) + draw(st.sampled_from([". ", ", ", " ", "\n"])) + text
    if draw(st.booleans()):
        text = text + draw(st.sampled_from([". ", " ", "\n"])) + draw(st.sampled_from(SURROUNDINGS))
    return phrase, text


def test_every_phrase_is_caught_on_its_own() -> None:
    for phrase in CRISIS_PHRASES:
        assert detector.detect(phrase), phrase


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(disguised())
def test_disguises_do_not_hide_a_crisis(case: tuple) -> None:
    phrase, text = case
    original = detector.detect(phrase)
    found = detector.detect(text)
    assert found is not None, text
    assert original.category in found.categories, (text, found)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_any_text_is_handled_without_error(text: str) -> None:
    detector.detect(text)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(CRISIS_PHRASES), st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_a_crisis_phrase_after_any_noise_is_still_caught(phrase: str, noise: str) -> None:
    found = detector.detect(noise + "\n" + phrase)
    # Noise may itself contain a negation or "years ago"; the phrase is in its own sentence,
    # so only a time marker could legitimately change the verdict.
    explanation = detector.explain(noise + "\n" + phrase)
    assert found is not None or explanation.context.get("past"), (noise, phrase)
