"""The REST channel (``POST /webhooks/rest/webhook``), safe with bad input.

Same URL and reply format as Rasa's ``rest`` channel. Differences:

- a body that is not a JSON object with a ``sender`` gets a 400 that says
  what to send (not a 500), a body over ``MAX_BODY_BYTES`` a 413, both as
  ``{"error", "message"}``;
- text is cleaned and capped (``bot.channels.inbound``); a message that was
  cut gets a ``notice`` (``message_truncated``) after the bot's answer;
- messages over the rate limits (``bot.channels.limits``) get a 429 with
  ``Retry-After``, except a message that signals danger, which gets the
  crisis handoff;
- a few messages are worked on at once, the others wait their turn, and a
  message that signals danger skips the queue (``bot.channels.admission``);
- the message text never reaches the logs; and when processing fails, the
  visitor still gets a reply: the crisis handoff if the message signals
  danger, otherwise a calm "something went wrong".
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Dict, List, Optional, Text

from sanic import Blueprint, response
from sanic.request import Request
from sanic.response import HTTPResponse

from rasa.core.channels.channel import CollectingOutputChannel, InputChannel, UserMessage

from bot.channels.admission import Admission, shared_admission
from bot.channels.inbound import MAX_BODY_BYTES, MAX_CHARS, BadRequest, inbound_from_payload, parse_json_body
from bot.channels.limits import RateLimiter, Route
from bot.channels.safety import emergency_turn, notice_messages, notice_text, signals_danger

logger = logging.getLogger(__name__)


class SafeRestInput(InputChannel):
    """Rasa's REST channel with validation, limits and a reply even when something fails."""

    @classmethod
    def name(cls) -> Text:
        return "rest"

    def __init__(self, limiter: Optional[RateLimiter] = None, admission: Optional[Admission] = None) -> None:
        self.limiter = limiter or RateLimiter.from_env()
        self.admission = admission or shared_admission()

    def blueprint(self, on_new_message: Callable[[UserMessage], Awaitable[Any]]) -> Blueprint:
        webhook = Blueprint("safe_rest_webhook", __name__)

        @webhook.route("/", methods=["GET"])
        async def health(_: Request) -> HTTPResponse:
            return response.json({"status": "ok"})

        # A streamed route: the body is read here, up to MAX_BODY_BYTES, instead
        # of whole by Sanic (whose own limit is 100 MB).
        @webhook.route("/webhook", methods=["POST"], stream=True)
        async def receive(request: Request) -> HTTPResponse:
            body = await _read_body(request)
            if body is None:
                return _error(413, "too_large", f"the body is larger than {MAX_BODY_BYTES} bytes: send one chat message")
            try:
                inbound = inbound_from_payload(parse_json_body(body))
            except BadRequest as exc:
                return _error(400, "bad_request", str(exc))

            address = self.limiter.address_key(request.ip, request.headers.get("x-forwarded-for"))
            route, verdict = self.limiter.route(inbound.sender, address, lambda: signals_danger(inbound.text),
                                                "rest channel")
            if route is Route.SLOW_DOWN:
                return _error(
                    429,
                    "rate_limited",
                    notice_text("rate_limited"),
                    retry_after=verdict.retry_after,
                    headers={"Retry-After": str(verdict.retry_after)},
                )
            if route is Route.CHANNEL_HANDOFF:
                return response.json(emergency_turn(request.app, inbound, inbound.sender))

            collector = CollectingOutputChannel()
            message = UserMessage(
                inbound.text,
                collector,
                inbound.sender,
                input_channel=self.name(),
                metadata=inbound.metadata,
            )
            try:
                async with self.admission.turn(inbound.text):
                    await on_new_message(message)
            except asyncio.CancelledError:
                logger.error("rest channel: message handling was cancelled (timeout)")
            except Exception as exc:  # never a 500: the visitor gets a reply
                logger.error("rest channel: message handling failed: %s", type(exc).__name__)
            messages: List[Dict[str, Any]] = collector.messages
            if not messages:
                messages = emergency_turn(request.app, inbound, inbound.sender)
            if inbound.truncated:
                messages = messages + [
                    {"recipient_id": inbound.sender, **m}
                    for m in notice_messages("message_truncated", max_chars=MAX_CHARS)
                ]
            return response.json(messages)

        return webhook


async def _read_body(request: Request) -> Optional[bytes]:
    """The request body, or None when it is larger than ``MAX_BODY_BYTES``.

    (Sanic then reads and drops the rest, so the client gets the 413.)
    """
    try:
        declared = int(request.headers.get("content-length") or 0)
    except ValueError:
        declared = 0
    if declared > MAX_BODY_BYTES:
        return None
    if request.stream is None:  # not streamed (e.g. Sanic's test client)
        return request.body if len(request.body or b"") <= MAX_BODY_BYTES else None
    body = bytearray()
    while True:
        chunk = await request.stream.read()
        if chunk is None:
            return bytes(body)
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            return None


def _error(status: int, error: str, message: str, headers: Optional[Dict[str, str]] = None, **extra: Any) -> HTTPResponse:
    return response.json({"error": error, "message": message, **extra}, status=status, headers=headers)
