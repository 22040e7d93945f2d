"""Storage: conversations in SQL (SQLite by default, PostgreSQL with BOT_DB_URL), redacted.

``db`` makes the engine and runs the migrations, ``schema`` declares the
tables, ``tracker_store`` is the Rasa tracker store that redacts before it
writes, ``retention`` purges old conversations.
"""
