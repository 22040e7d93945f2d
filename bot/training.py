"""Training: validate, fingerprint the data, and train a model named by date and data hash.

``make run`` and ``make test`` train only when no model exists for the
current data (the fingerprint covers everything that goes into a model), so a
second run does no work.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Callable, List, Optional

from bot import paths

#: Folders and files whose content goes into a model.
MODEL_INPUTS = ("config.yml", "domain", "data/nlu", "data/rules", "data/stories", "bot/nlu")
#: What ``rasa train`` reads as training data.
TRAINING_DATA = ("data/nlu", "data/rules", "data/stories")


def _input_files(project_dir: Path) -> List[Path]:
    files: List[Path] = []
    for name in MODEL_INPUTS:
        path = project_dir / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(p for p in sorted(path.rglob("*")) if p.is_file() and p.suffix in (".yml", ".yaml", ".py"))
    return files


def data_fingerprint(project_dir: Optional[Path] = None) -> str:
    """A short hash of every training input (changes when any of them changes)."""
    project_dir = Path(project_dir) if project_dir else paths.project_dir()
    digest = hashlib.sha256()
    for path in _input_files(project_dir):
        digest.update(str(path.relative_to(project_dir)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()[:12]


def training_paths(project_dir: Optional[Path] = None) -> List[str]:
    project_dir = Path(project_dir) if project_dir else paths.project_dir()
    return [str(project_dir / p) for p in TRAINING_DATA if (project_dir / p).exists()]


def models_for(fingerprint: str, models_dir: Optional[Path] = None) -> List[Path]:
    """Models trained on data with this fingerprint, newest first."""
    models_dir = Path(models_dir) if models_dir else paths.models_dir()
    return sorted(models_dir.glob(f"*-{fingerprint}.tar.gz"), reverse=True)


def all_models(models_dir: Optional[Path] = None) -> List[Path]:
    """Every trained model, newest first (names start with the training time)."""
    models_dir = Path(models_dir) if models_dir else paths.models_dir()
    return sorted((p for p in models_dir.glob("*.tar.gz") if p.name[:8].isdigit()), reverse=True)


def model_name(fingerprint: str) -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{fingerprint}"


def train(
    project_dir: Optional[Path] = None,
    finetune_from: Optional[Path] = None,
    epoch_fraction: float = 0.5,
    log: Callable[[str], None] = print,
) -> Path:
    """Trains a model on the project's data and returns its path."""
    from rasa.model_training import train as rasa_train

    from bot.language import ensure_english_pipeline

    project_dir = Path(project_dir) if project_dir else paths.project_dir()
    ensure_english_pipeline(project_dir / "models" / "spacy-en")
    fingerprint = data_fingerprint(project_dir)
    name = model_name(fingerprint)
    started = time.perf_counter()
    log(f"training model {name} ({'finetuning ' + finetune_from.name if finetune_from else 'from scratch'})")
    result = rasa_train(
        domain=str(project_dir / "domain"),
        config=str(project_dir / "config.yml"),
        training_files=training_paths(project_dir),
        output=str(project_dir / "models"),
        fixed_model_name=name,
        model_to_finetune=str(finetune_from) if finetune_from else None,
        finetuning_epoch_fraction=epoch_fraction,
    )
    if result.code != 0 or not result.model:
        raise RuntimeError(f"training failed (code {result.code})")
    log(f"trained in {time.perf_counter() - started:.1f} s: {result.model}")
    return Path(result.model)


def ensure_model(project_dir: Optional[Path] = None, log: Callable[[str], None] = print) -> Path:
    """The newest model for the current data, trained first if there is none."""
    project_dir = Path(project_dir) if project_dir else paths.project_dir()
    existing = models_for(data_fingerprint(project_dir), project_dir / "models")
    if existing:
        log(f"model up to date: {existing[0].name}")
        return existing[0]
    return train(project_dir, log=log)
