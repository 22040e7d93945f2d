"""Rasa input channels of the project: REST and socket.io, hardened.

Rasa 3.6's stock channels answer bad bodies with a 500, log message text on
failure, and (socket.io) lose ``custom`` payloads and every reply with
python-socketio >= 5.10. These replacements keep Rasa's URLs and events.
"""
