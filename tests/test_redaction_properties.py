"""Property-based tests of the redaction: it never crashes, and a planted detail never survives
whatever ordinary chat text surrounds it."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.redact import default_redactor

WORDS = ["he", "she", "they", "my", "ex", "still", "texts", "me", "at", "call", "or", "email", "is",
         "and", "why", "do", "i", "miss", "him", "her", "please", "help", "number", "new", "the", "lol"]
PUNCTUATION = [" ", " ", " ", ", ", ". ", "! ", "? ", " - ", "\n"]

chat = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(PUNCTUATION)), max_size=12).map(
    lambda pairs: "".join(w + p for w, p in pairs)
)
emails = st.from_regex(r"[a-z]{2,10}(\.[a-z]{2,8})?@[a-z]{3,10}\.(com|org|net|co\.uk)", fullmatch=True)
phones = st.builds(
    lambda area, exchange, line, style: style.format(a=area, e=exchange, l=f"{line:04d}"),
    st.integers(201, 989).filter(lambda a: a % 100 != 11 and str(a)[1] != "9"),
    st.integers(201, 989).filter(lambda e: e % 100 != 11),
    st.integers(0, 9999),
    st.sampled_from(["({a}) {e}-{l}", "{a}-{e}-{l}", "{a}.{e}.{l}", "+1 {a} {e} {l}", "1-{a}-{e}-{l}"]),
)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.text(max_size=400))
def test_any_text_is_redacted_without_crashing(text: str) -> None:
    assert isinstance(default_redactor().redact(text), str)


@FAST
@given(chat, emails, chat)
def test_a_planted_email_never_survives(before: str, email: str, after: str) -> None:
    redacted = default_redactor().redact(f"{before}{email} {after}")
    assert email not in redacted
    assert email.split("@")[1] not in redacted, redacted


@FAST
@given(chat, phones, chat)
def test_a_planted_phone_number_never_survives(before: str, phone: str, after: str) -> None:
    redacted = default_redactor().redact(f"{before}{phone} {after}")
    digits = "".join(ch for ch in phone if ch.isdigit())[-7:]
    assert digits not in "".join(ch for ch in redacted if ch.isdigit()), (phone, redacted)


def test_the_first_message_with_digits_does_not_wait_for_lazy_loading() -> None:
    """The address parser and the phone metadata load with the redactor, not on a visitor's message."""
    import subprocess
    import sys

    probe = (
        "import sys, time\n"
        "from bot.redact import default_redactor\n"
        "r = default_redactor()\n"
        "loaded = 'pyap' in sys.modules\n"
        "t = time.perf_counter(); r.redact('why did i stay 9 yrs when i knew'); ms = (time.perf_counter() - t) * 1000\n"
        "print(loaded, round(ms, 1))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    loaded, ms = out.stdout.split()
    assert loaded == "True"
    assert float(ms) < 60, f"first redaction with digits took {ms} ms (lazy loading was ~190 ms)"
