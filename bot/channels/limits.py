"""Rate limits of the chat channels: per conversation and per client address.

Token buckets, in this process's memory only. A bucket of ``N/S`` holds up
to N messages and refills N every S seconds: a burst of N is fine, and after
it one message every S/N seconds. The defaults are far above what a person
typing (or clicking topic buttons) ever sends, and far below what a script
sends:

- ``BOT_RATE_PER_SENDER`` (default ``20/60``): per conversation (sender id).
- ``BOT_RATE_PER_IP`` (default ``600/60``): per client address. Higher,
  because a shelter, a library or a mobile network puts many visitors behind
  one address.

``off`` switches a limit off. A bad value stops the server at start-up (a
typo must not silently remove the limit).

Client addresses are never stored or logged: a bucket's key is a keyed hash
of the address (the key is random per process), the table forgets a bucket
once it is full again (after S seconds without messages) and never holds more
than ``MAX_KEYS`` buckets. The address is the socket peer's. Behind a reverse
proxy, list the proxy's addresses (or networks) in ``BOT_TRUSTED_PROXIES``:
then the client address is taken from ``X-Forwarded-For`` when the request
comes from such a proxy, and when that proxy does not send the header (the
nginx of ``deploy/`` does not), the client is unknown and only the
per-conversation limit applies; the proxy limits per address itself.

A loopback client (127.0.0.1, ::1) is not limited per address: the Rasa
server listens on 127.0.0.1 by default, so such a client is a reverse proxy
on the same machine (which hides the visitors' addresses) or a local tool
(tests, ``make eval``, the benchmark). ``BOT_RATE_LIMIT_LOOPBACK=1`` limits
it too. The per-conversation limit always applies.

A message over the limit that signals danger is never dropped. It goes to
the bot as usual, answered with the crisis handoff and stored for the
advocates' review like any other turn, while the conversation and the
address have some of their danger allowance left:

- ``BOT_RATE_DANGER_PER_SENDER`` (default ``10/60``) and
  ``BOT_RATE_DANGER_PER_IP`` (default ``100/60``).

Past the allowance (a script sending danger words in a loop, to get round
the limit) the channel answers by itself with the same handoff
(``bot.channels.safety``), without the bot and without storing the turn.

The buckets live in each Rasa server process. deploy/'s nginx keeps a
conversation on one server, so the per-conversation limits hold as set;
behind a plain round robin, and per address, a visitor's effective limit is
the per-process limit times the number of replicas.
"""
from __future__ import annotations

import hashlib
import hmac
import enum
import ipaddress
import logging
import math
import os
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable, Iterable, List, Mapping, Optional, Tuple, Union

logger = logging.getLogger(__name__)

DEFAULT_PER_SENDER = "20/60"
DEFAULT_PER_IP = "600/60"
DEFAULT_DANGER_PER_SENDER = "10/60"
DEFAULT_DANGER_PER_IP = "100/60"
#: Most buckets kept per limit; the least recently used go first.
MAX_KEYS = 50_000

_OFF = ("off", "none", "unlimited", "0")

Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]


@dataclass(frozen=True)
class Rate:
    """``capacity`` messages, refilled in full every ``period`` seconds."""

    capacity: int
    period: float

    @property
    def per_second(self) -> float:
        return self.capacity / self.period

    def __str__(self) -> str:
        return f"{self.capacity}/{self.period:g}"


def parse_rate(raw: Optional[str], name: str = "rate") -> Optional[Rate]:
    """``"20/60"`` → 20 messages per 60 s; ``"20"`` → per 60 s; ``"off"`` → None."""
    text = (raw or "").strip().lower()
    if text in _OFF:
        return None
    count, _, period = text.partition("/")
    try:
        rate = Rate(int(count), float(period) if period.strip() else 60.0)
    except ValueError:
        raise ValueError(f"{name} must look like 20/60 (messages/seconds) or off, not {raw!r}") from None
    if rate.capacity < 1 or not (0 < rate.period < math.inf):
        raise ValueError(f"{name} must be at least 1 message per a positive number of seconds, not {raw!r}")
    return rate


class TokenBuckets:
    """One token bucket per key; a bucket that has refilled is forgotten."""

    def __init__(self, rate: Rate, max_keys: int = MAX_KEYS, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.max_keys = max_keys
        self.clock = clock
        self._buckets: "OrderedDict[str, Tuple[float, float]]" = OrderedDict()  # key -> (tokens, at)

    def __len__(self) -> int:
        return len(self._buckets)

    def _level(self, key: str, now: float) -> float:
        entry = self._buckets.get(key)
        if entry is None:
            return float(self.rate.capacity)
        tokens, at = entry
        return min(float(self.rate.capacity), tokens + max(0.0, now - at) * self.rate.per_second)

    def wait(self, key: str, now: Optional[float] = None) -> float:
        """Seconds until ``key`` may send again (0: now)."""
        now = self.clock() if now is None else now
        level = self._level(key, now)
        return 0.0 if level >= 1.0 else (1.0 - level) / self.rate.per_second

    def take(self, key: str, now: Optional[float] = None) -> None:
        now = self.clock() if now is None else now
        self._buckets[key] = (self._level(key, now) - 1.0, now)
        self._buckets.move_to_end(key)
        self._forget(now)

    def _forget(self, now: float) -> None:
        # Least recently used first: drop buckets that are full again, then any over the cap.
        while self._buckets:
            key, (_, at) = next(iter(self._buckets.items()))
            if now - at < self.rate.period and len(self._buckets) <= self.max_keys:
                break
            del self._buckets[key]


class TrustedProxies:
    """The addresses (or networks) whose ``X-Forwarded-For`` is believed."""

    def __init__(self, networks: Iterable[Network] = ()) -> None:
        self.networks: List[Network] = list(networks)

    @classmethod
    def parse(cls, raw: Optional[str]) -> "TrustedProxies":
        networks = []
        for item in (raw or "").replace(",", " ").split():
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ValueError(f"BOT_TRUSTED_PROXIES: {item!r} is not an address or a network") from None
        return cls(networks)

    def __bool__(self) -> bool:
        return bool(self.networks)

    def __contains__(self, address: object) -> bool:
        ip = _ip(address) if isinstance(address, str) else None
        return ip is not None and any(ip in network for network in self.networks)


def _ip(text: str) -> Optional[Union[ipaddress.IPv4Address, ipaddress.IPv6Address]]:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # "[2001:db8::1]:443"
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # "192.0.2.1:443"
        text = text.split(":")[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped or ip


def client_address(peer: Optional[str], forwarded_for: Optional[str], trusted: TrustedProxies) -> Optional[str]:
    """The visitor's address: the socket peer, or from ``X-Forwarded-For`` via a trusted proxy.

    None when it is not known (a trusted proxy that does not say).
    """
    peer = (peer or "").strip()
    if not trusted or peer not in trusted:
        return peer or None
    hops = [h.strip() for h in (forwarded_for or "").split(",") if h.strip()]
    for hop in reversed(hops):  # the rightmost address not added by our own proxies
        if hop not in trusted:
            ip = _ip(hop)
            return str(ip) if ip is not None else hop[:64]
    return None


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after: int = 0  # whole seconds, at least 1 when not allowed
    scope: str = ""  # "sender" or "address": which limit was hit


class Route(enum.Enum):
    """Where a channel sends a message once the limits have had their say."""

    BOT = "bot"  # to Rasa, as usual (within the limits, or danger within its allowance)
    SLOW_DOWN = "slow_down"  # over the limit: the channel asks the visitor to wait
    CHANNEL_HANDOFF = "channel_handoff"  # danger past its allowance: the channel's own handoff, not stored


class RateLimiter:
    """The per-sender and per-address limits of one channel."""

    def __init__(
        self,
        per_sender: Optional[Rate],
        per_ip: Optional[Rate],
        trusted: Optional[TrustedProxies] = None,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = MAX_KEYS,
        limit_loopback: bool = False,
        danger_per_sender: Optional[Rate] = None,
        danger_per_ip: Optional[Rate] = None,
    ) -> None:
        self.clock = clock
        self.trusted = trusted or TrustedProxies()
        self.limit_loopback = limit_loopback
        self.senders = TokenBuckets(per_sender, max_keys, clock) if per_sender else None
        self.addresses = TokenBuckets(per_ip, max_keys, clock) if per_ip else None
        # Danger over the limit: how much of it still goes through the bot (None: all of it).
        self.danger_senders = TokenBuckets(danger_per_sender, max_keys, clock) if danger_per_sender else None
        self.danger_addresses = TokenBuckets(danger_per_ip, max_keys, clock) if danger_per_ip else None
        self._key = secrets.token_bytes(32)  # per process: the hashes mean nothing elsewhere

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None) -> "RateLimiter":
        env = os.environ if environ is None else environ
        return cls(
            per_sender=parse_rate(env.get("BOT_RATE_PER_SENDER") or DEFAULT_PER_SENDER, "BOT_RATE_PER_SENDER"),
            per_ip=parse_rate(env.get("BOT_RATE_PER_IP") or DEFAULT_PER_IP, "BOT_RATE_PER_IP"),
            trusted=TrustedProxies.parse(env.get("BOT_TRUSTED_PROXIES")),
            limit_loopback=(env.get("BOT_RATE_LIMIT_LOOPBACK") or "").strip().lower() in ("1", "true", "yes"),
            danger_per_sender=parse_rate(env.get("BOT_RATE_DANGER_PER_SENDER") or DEFAULT_DANGER_PER_SENDER,
                                         "BOT_RATE_DANGER_PER_SENDER"),
            danger_per_ip=parse_rate(env.get("BOT_RATE_DANGER_PER_IP") or DEFAULT_DANGER_PER_IP, "BOT_RATE_DANGER_PER_IP"),
        )

    def address_key(self, peer: Optional[str], forwarded_for: Optional[str] = None) -> Optional[str]:
        """The keyed hash that stands for the visitor's address (None if unknown)."""
        address = client_address(peer, forwarded_for, self.trusted)
        if not address:
            return None
        if not self.limit_loopback:
            ip = _ip(address)
            if ip is not None and ip.is_loopback:
                return None
        return hmac.new(self._key, address.encode("utf-8", "replace"), hashlib.sha256).hexdigest()[:32]

    def _sender_key(self, sender: str) -> str:
        return hmac.new(self._key, b"sender:" + sender.encode("utf-8", "replace"), hashlib.sha256).hexdigest()[:32]

    def check(self, sender: str, address_key: Optional[str]) -> Verdict:
        """Takes one message from both buckets, or says how long to wait (taking nothing)."""
        return self._take(self.senders, self.addresses, sender, address_key)

    def route(self, sender: str, address_key: Optional[str], signals_danger: Callable[[], bool],
              channel: str) -> Tuple[Route, Verdict]:
        """Where this message goes; ``signals_danger`` is asked only for a message over the limit."""
        verdict = self.check(sender, address_key)
        if verdict.allowed:
            return Route.BOT, verdict
        if not signals_danger():
            logger.info("%s: over the %s rate limit", channel, verdict.scope)
            return Route.SLOW_DOWN, verdict
        if not self.check_danger(sender, address_key).allowed:
            logger.warning("%s: over the %s rate limit and the danger allowance: "
                           "crisis handoff from the channel, not stored", channel, verdict.scope)
            return Route.CHANNEL_HANDOFF, verdict
        logger.warning("%s: over the %s rate limit, but danger: answered as usual", channel, verdict.scope)
        return Route.BOT, verdict

    def check_danger(self, sender: str, address_key: Optional[str]) -> Verdict:
        """For a message over the limit that signals danger: may it still go through the bot?"""
        return self._take(self.danger_senders, self.danger_addresses, sender, address_key)

    def _take(self, senders: Optional[TokenBuckets], addresses: Optional[TokenBuckets], sender: str,
              address_key: Optional[str]) -> Verdict:
        now = self.clock()
        sender_key = self._sender_key(sender)
        waits = []
        if senders is not None:
            waits.append((senders.wait(sender_key, now), "sender"))
        if addresses is not None and address_key:
            waits.append((addresses.wait(address_key, now), "address"))
        wait, scope = max(waits, default=(0.0, ""))
        if wait > 0:
            return Verdict(False, max(1, math.ceil(wait)), scope)
        if senders is not None:
            senders.take(sender_key, now)
        if addresses is not None and address_key:
            addresses.take(address_key, now)
        return Verdict(True)
