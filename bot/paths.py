"""Where the project's files live, so that every module agrees on one layout."""
from __future__ import annotations

import os
from pathlib import Path

#: The repository root (the folder holding config.yml). ``BOT_PROJECT_DIR``
#: points elsewhere, for example at a temporary copy of the project in tests.
PROJECT_DIR = Path(os.environ.get("BOT_PROJECT_DIR", Path(__file__).resolve().parent.parent))


def project_dir() -> Path:
    """The project root; read at call time so tests can switch it."""
    return Path(os.environ.get("BOT_PROJECT_DIR", PROJECT_DIR))


def data_dir() -> Path:
    return project_dir() / "data"


def content_dir() -> Path:
    return data_dir() / "content"


def hotlines_dir() -> Path:
    return data_dir() / "hotlines"


def danger_dir() -> Path:
    return data_dir() / "danger"


def domain_dir() -> Path:
    return project_dir() / "domain"


def models_dir() -> Path:
    return project_dir() / "models"


def spacy_model_dir() -> Path:
    """The English spaCy pipeline built by ``bot build-spacy`` (not committed)."""
    return models_dir() / "spacy-en"


def var_dir() -> Path:
    """Runtime state outside git: the SQLite database, logs, pid files."""
    return Path(os.environ.get("BOT_VAR_DIR", project_dir() / "var"))


def cache_dir() -> Path:
    """Caches that only speed things up (sentence embeddings of training examples)."""
    return Path(os.environ.get("BOT_CACHE_DIR", var_dir() / "cache"))
