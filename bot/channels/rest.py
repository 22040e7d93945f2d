"""The REST channel (``POST /webhooks/rest/webhook``), safe with bad input.

Same URL and reply format as Rasa's ``rest`` channel. Differences: a body that
is not a JSON object with a ``sender`` gets a 400 that says what to send (not
a 500); text is cleaned and capped (``bot.channels.inbound``); the message text
never reaches the logs; and when processing fails, the visitor still gets a
reply: the crisis handoff if the message signals danger, otherwise a calm
"something went wrong".
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable, Dict, List, Text

from sanic import Blueprint, response
from sanic.request import Request
from sanic.response import HTTPResponse

from rasa.core.channels.channel import CollectingOutputChannel, InputChannel, UserMessage

from bot.channels.inbound import BadRequest, inbound_from_payload
from bot.channels.safety import emergency_turn

logger = logging.getLogger(__name__)


class SafeRestInput(InputChannel):
    """Rasa's REST channel with validation and a reply even when something fails."""

    @classmethod
    def name(cls) -> Text:
        return "rest"

    def blueprint(self, on_new_message: Callable[[UserMessage], Awaitable[Any]]) -> Blueprint:
        webhook = Blueprint("safe_rest_webhook", __name__)

        @webhook.route("/", methods=["GET"])
        async def health(_: Request) -> HTTPResponse:
            return response.json({"status": "ok"})

        @webhook.route("/webhook", methods=["POST"])
        async def receive(request: Request) -> HTTPResponse:
            try:
                payload = request.json
            except Exception:  # sanic raises on invalid JSON or encoding
                return _bad_request("the body is not valid JSON")
            try:
                inbound = inbound_from_payload(payload)
            except BadRequest as exc:
                return _bad_request(str(exc))
            collector = CollectingOutputChannel()
            message = UserMessage(
                inbound.text,
                collector,
                inbound.sender,
                input_channel=self.name(),
                metadata=inbound.metadata,
            )
            try:
                await on_new_message(message)
            except asyncio.CancelledError:
                logger.error("rest channel: message handling was cancelled (timeout)")
            except Exception as exc:  # never a 500: the visitor gets a reply
                logger.error("rest channel: message handling failed: %s", type(exc).__name__)
            messages: List[Dict[str, Any]] = collector.messages
            if not messages:
                messages = emergency_turn(request.app, inbound, inbound.sender)
            return response.json(messages)

        return webhook


def _bad_request(reason: str) -> HTTPResponse:
    return response.json({"error": "bad_request", "message": reason}, status=400)
