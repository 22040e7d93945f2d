"""``python -m bot``: the maintainers' command line (see ``python -m bot --help``)."""
from bot.cli import main

main()
