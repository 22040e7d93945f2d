"""The socket.io channel, fixed for the widget.

Rasa 3.6's ``socketio`` channel passes a ``custom`` payload to ``emit`` as
keyword arguments (the payload is lost) and calls ``enter_room`` without
``await`` (python-socketio >= 5.10 then drops every reply). This channel keeps
Rasa's events (``session_request``, ``user_uttered``, ``bot_uttered``) and
sends every bot message in the same shape as the REST channel: ``{"text",
"buttons"}`` or ``{"custom"}``. Bad events get a calm reply, never a crash.

As on REST, messages are cleaned and capped (a cut message gets a
``message_truncated`` notice after the answer), and the rate limits of
``bot.channels.limits`` apply (per conversation, and per client address as
seen when the socket connected): a message over a limit gets a calm
"please slow down" (a ``rate_limited`` notice), or the crisis handoff if it
signals danger. Packets larger than ``MAX_BODY_BYTES`` close the socket
(engine.io's rule); the widget then reconnects.
"""
from __future__ import annotations

import inspect
import json
import logging
import uuid
from typing import Any, Awaitable, Callable, Dict, List, Optional, Text

from sanic import Blueprint, response
from sanic.request import Request
from sanic.response import HTTPResponse
from socketio import AsyncServer

from rasa.core.channels.channel import InputChannel, OutputChannel, UserMessage
from rasa.core.channels.socketio import SocketBlueprint

from bot.channels.admission import shared_admission
from bot.channels.inbound import MAX_BODY_BYTES, MAX_CHARS, BadRequest, inbound_from_payload
from bot.channels.limits import RateLimiter, Route
from bot.channels.safety import emergency_messages, notice_messages, signals_danger

logger = logging.getLogger(__name__)


def _allowed_origins() -> List[str]:
    """The widget's sites (BOT_ALLOWED_ORIGINS), as for the REST channel's CORS."""
    from bot.server import allowed_origins

    return allowed_origins()


class SafeSocketIOOutput(OutputChannel):
    """Emits each bot message to the visitor's room as one ``bot_uttered`` event."""

    @classmethod
    def name(cls) -> Text:
        return "socketio"

    def __init__(self, sio: AsyncServer, bot_message_evt: Text, namespace: Optional[str] = None) -> None:
        self.sio = sio
        self.bot_message_evt = bot_message_evt
        self.namespace = namespace
        self.sent = 0

    async def emit(self, recipient_id: Text, message: Dict[str, Any]) -> None:
        self.sent += 1
        await self.sio.emit(self.bot_message_evt, message, room=recipient_id, namespace=self.namespace)

    async def send_text_message(self, recipient_id: Text, text: Text, **kwargs: Any) -> None:
        await self.emit(recipient_id, {"text": text})

    async def send_text_with_buttons(
        self, recipient_id: Text, text: Text, buttons: List[Dict[Text, Any]], **kwargs: Any
    ) -> None:
        await self.emit(recipient_id, {"text": text, "buttons": buttons})

    async def send_quick_replies(
        self, recipient_id: Text, text: Text, quick_replies: List[Dict[Text, Any]], **kwargs: Any
    ) -> None:
        await self.emit(recipient_id, {"text": text, "buttons": quick_replies})

    async def send_custom_json(self, recipient_id: Text, json_message: Dict[Text, Any], **kwargs: Any) -> None:
        await self.emit(recipient_id, {"custom": json_message})

    async def send_image_url(self, recipient_id: Text, image: Text, **kwargs: Any) -> None:
        await self.emit(recipient_id, {"image": image})

    async def send_attachment(self, recipient_id: Text, attachment: Text, **kwargs: Any) -> None:  # type: ignore[override]
        await self.emit(recipient_id, {"attachment": attachment})


class SafeSocketIOInput(InputChannel):
    """Rasa's socket.io input channel with the fixes above."""

    @classmethod
    def name(cls) -> Text:
        return "socketio"

    @classmethod
    def from_credentials(cls, credentials: Optional[Dict[Text, Any]]) -> InputChannel:
        credentials = credentials or {}
        return cls(
            user_message_evt=credentials.get("user_message_evt", "user_uttered"),
            bot_message_evt=credentials.get("bot_message_evt", "bot_uttered"),
            namespace=credentials.get("namespace"),
            session_persistence=credentials.get("session_persistence", False),
            socketio_path=credentials.get("socketio_path", "/socket.io"),
            metadata_key=credentials.get("metadata_key", "metadata"),
            cors_allowed_origins=credentials.get("cors_allowed_origins") or _allowed_origins(),
        )

    def __init__(
        self,
        user_message_evt: Text = "user_uttered",
        bot_message_evt: Text = "bot_uttered",
        namespace: Optional[Text] = None,
        session_persistence: bool = False,
        socketio_path: Text = "/socket.io",
        metadata_key: Text = "metadata",
        cors_allowed_origins: Any = None,
        limiter: Optional[RateLimiter] = None,
    ) -> None:
        self.limiter = limiter or RateLimiter.from_env()
        self.admission = shared_admission()
        #: socket id -> keyed hash of the client address (never the address), while connected
        self._addresses: Dict[Text, Optional[str]] = {}
        self.user_message_evt = user_message_evt
        self.bot_message_evt = bot_message_evt
        self.namespace = namespace
        self.session_persistence = session_persistence
        self.socketio_path = socketio_path
        self.metadata_key = metadata_key
        self.cors_allowed_origins = cors_allowed_origins if cors_allowed_origins is not None else _allowed_origins()
        self.sio: Optional[AsyncServer] = None

    def get_output_channel(self) -> Optional[OutputChannel]:
        if self.sio is None:
            return None
        return SafeSocketIOOutput(self.sio, self.bot_message_evt, self.namespace)

    def blueprint(self, on_new_message: Callable[[UserMessage], Awaitable[Any]]) -> Blueprint:
        sio = AsyncServer(
            async_mode="sanic",
            cors_allowed_origins=self.cors_allowed_origins,
            max_http_buffer_size=MAX_BODY_BYTES,
        )
        # Rasa's --cors (Sanic-CORS, the same origins) already adds the CORS
        # headers to these routes; engine.io adding them as well sends the
        # header twice, which browsers refuse. engine.io still turns away
        # origins that are not allowed.
        sio.eio._cors_headers = lambda environ: []
        self.sio = sio
        webhook = SocketBlueprint(sio, self.socketio_path, "safe_socketio_webhook", __name__)

        @webhook.route("/", methods=["GET"])
        async def health(_: Request) -> HTTPResponse:
            return response.json({"status": "ok"})

        @sio.on("connect", namespace=self.namespace)
        async def connect(sid: Text, environ: Dict, auth: Optional[Dict] = None) -> bool:
            request = environ.get("sanic.request")  # engine.io's REMOTE_ADDR is always 127.0.0.1
            peer = getattr(request, "ip", None) if request is not None else environ.get("REMOTE_ADDR")
            self._addresses[sid] = self.limiter.address_key(peer, environ.get("HTTP_X_FORWARDED_FOR"))
            return True

        @sio.on("disconnect", namespace=self.namespace)
        async def disconnect(sid: Text) -> None:
            self._addresses.pop(sid, None)
            logger.debug("socket.io: a visitor disconnected")

        @sio.on("session_request", namespace=self.namespace)
        async def session_request(sid: Text, data: Any = None) -> None:
            session_id = data.get("session_id") if isinstance(data, dict) else None
            if not isinstance(session_id, str) or not session_id or len(session_id) > 128:
                session_id = uuid.uuid4().hex
            if self.session_persistence:
                entered = sio.enter_room(sid, session_id, namespace=self.namespace)
                if inspect.isawaitable(entered):  # python-socketio >= 5.10
                    await entered
            await sio.emit("session_confirm", session_id, room=sid, namespace=self.namespace)

        @sio.on(self.user_message_evt, namespace=self.namespace)
        async def handle_message(sid: Text, data: Any = None, *_: Any) -> None:  # extra arguments are ignored
            output = SafeSocketIOOutput(sio, self.bot_message_evt, self.namespace)
            if isinstance(data, str):  # a JSON object as a string, or the message itself
                try:
                    parsed = json.loads(data)
                except (ValueError, RecursionError):
                    parsed = None
                data = parsed if isinstance(parsed, dict) else {"message": data}
            if isinstance(data, dict) and isinstance(data.get(self.metadata_key), str):
                try:
                    data[self.metadata_key] = json.loads(data[self.metadata_key])
                except (ValueError, RecursionError):
                    data[self.metadata_key] = {}
            if self.session_persistence:
                session_id = data.get("session_id") if isinstance(data, dict) else None
                if not isinstance(session_id, str) or not session_id:
                    await output.emit(sid, {"text": "Please reconnect: this chat has no session yet."})
                    return
                sender = session_id
            else:
                sender = sid
            try:
                payload = dict(data) if isinstance(data, dict) else data
                if isinstance(payload, dict) and self.metadata_key != "metadata":
                    payload["metadata"] = payload.get(self.metadata_key)
                inbound = inbound_from_payload(payload, sender=sender)
            except BadRequest as exc:
                await output.emit(sid, {"error": "bad_request", "message": str(exc)})
                return
            route, verdict = self.limiter.route(sender, self._addresses.get(sid),
                                                lambda: signals_danger(inbound.text), "socket.io channel")
            if route is not Route.BOT:
                if route is Route.SLOW_DOWN:
                    replies = notice_messages("rate_limited", retry_after=verdict.retry_after)
                else:
                    replies = emergency_messages(inbound.text, inbound.metadata.get("region"))
                for reply in replies:
                    await output.emit(sender, reply)
                return
            message = UserMessage(
                inbound.text, output, sender, input_channel=self.name(), metadata=inbound.metadata
            )
            try:
                async with self.admission.turn(inbound.text):
                    await on_new_message(message)
            except Exception as exc:  # the widget must never go silent
                logger.error("socket.io channel: message handling failed: %s", type(exc).__name__)
            if output.sent == 0:
                for reply in emergency_messages(inbound.text, inbound.metadata.get("region")):
                    await output.emit(sender, reply)
            if inbound.truncated:
                for reply in notice_messages("message_truncated", max_chars=MAX_CHARS):
                    await output.emit(sender, reply)

        return webhook
