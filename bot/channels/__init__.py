"""Rasa input channels of the project: REST and socket.io, hardened.

Rasa 3.6's stock channels answer bad bodies with a 500, log message text on
failure, and (socket.io) lose ``custom`` payloads and every reply with
python-socketio >= 5.10. These replacements keep Rasa's URLs and events.

Loading them also installs ``bot.resilience`` (replies when the action server
is down), ``bot.graph_runner`` (the model's graph without dask) and
``bot.sessions`` (a session also ends after 100 messages),
``bot.debug_logging`` (no debug log lines built when nobody reads them),
``bot.turns`` (no copy of the conversation for actions that only read it),
``bot.event_types`` (event classes found by name in a dictionary),
``bot.domain_cache`` (the domain is not serialised for every message) and
``bot.response_fill`` (responses copied as plain data, filled only if they
have a placeholder),
since every server of this project loads these channels.
"""
from bot import debug_logging, domain_cache, event_types, graph_runner, resilience, response_fill, sessions, turns

resilience.install()
graph_runner.install()
sessions.install()
debug_logging.install()
turns.install()
event_types.install()
domain_cache.install()
response_fill.install()
