"""``rasa data validate --fail-on-warnings``, run in this process before training.

Run as a separate ``rasa`` command it took ten seconds of every training,
most of them importing Rasa and TensorFlow again (the command line's
TensorFlow stand-in does not reach a child process), while the training
that follows has them loaded already. This runs Rasa's own checks
(``rasa.cli.utils.validate_files``, the function behind the command) on the
same files and with the same strictness, and returns what they found,
with the loaded data, which the training then reuses instead of reading
every file again.
"""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Optional

class _Collect(logging.Handler):
    """Keeps the warnings and errors Rasa logs while it validates."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.lines: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.levelname}: {record.getMessage()}")


@dataclass
class Validation:
    """What Rasa's checks found (empty: valid), and the data they read."""

    problems: List[str] = field(default_factory=list)
    importer: Optional[Any] = None  # rasa's TrainingDataImporter, with the files read


def validate_with_rasa(project: Path) -> Validation:
    """Rasa's checks of the project's domain and configuration, and of the data it trains on."""
    import rasa.cli.utils
    from rasa.shared.importers.importer import TrainingDataImporter

    from bot.training import training_paths

    handler = _Collect()
    rasa_logger = logging.getLogger("rasa")
    rasa_logger.addHandler(handler)
    passed = True
    importer = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            importer = TrainingDataImporter.load_from_config(
                config_path=str(project / "config.yml"),
                domain_path=str(project / "domain"),
                training_data_paths=training_paths(project),
            )
            rasa.cli.utils.validate_files(True, None, importer)
        except SystemExit as exc:  # Rasa's way of saying the data is not valid
            passed = exc.code in (0, None)
        except Exception as exc:  # noqa: BLE001  (a file Rasa cannot read is a problem to report)
            handler.lines.append(f"{type(exc).__name__}: {exc}")
            passed = False
        finally:
            rasa_logger.removeHandler(handler)
    if passed:
        return Validation([], importer)
    found = [f"{w.category.__name__}: {w.message}" for w in caught if issubclass(w.category, UserWarning)]
    unique = list(dict.fromkeys(found + handler.lines))  # Rasa repeats some warnings once per slot or file
    return Validation(unique or ["rasa data validate found a problem"])
