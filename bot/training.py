"""Training: validate, fingerprint the data, and train a model named by date and data hash.

``make run`` and ``make test`` train only when no model exists for the
current data (the fingerprint covers everything that goes into a model), so a
second run does no work.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

from bot import paths

#: Folders and files whose content goes into a model.
MODEL_INPUTS = ("config.yml", "domain", "data/nlu", "data/rules", "data/stories", "bot/nlu")
#: Inputs that a finetune must leave unchanged (only phrases may change).
STRUCTURE_INPUTS = ("config.yml", "domain", "data/rules", "data/stories", "bot/nlu")
#: What ``rasa train`` reads as training data.
TRAINING_DATA = ("data/nlu", "data/rules", "data/stories")


def _input_files(project_dir: Path, inputs: tuple = MODEL_INPUTS) -> List[Path]:
    files: List[Path] = []
    for name in inputs:
        path = project_dir / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(p for p in sorted(path.rglob("*")) if p.is_file() and p.suffix in (".yml", ".yaml", ".py"))
    return files


def data_fingerprint(project_dir: Optional[Path] = None, inputs: tuple = MODEL_INPUTS) -> str:
    """A short hash of every training input (changes when any of them changes)."""
    project_dir = Path(project_dir) if project_dir else paths.project_dir()
    digest = hashlib.sha256()
    for path in _input_files(project_dir, inputs):
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


def structure_fingerprint(project_dir: Optional[Path] = None) -> str:
    """A hash of everything but the example phrases: unchanged means a finetune is possible."""
    return data_fingerprint(project_dir, STRUCTURE_INPUTS)


def sidecar(model: Path) -> Path:
    return Path(str(model).replace(".tar.gz", ".json"))


@contextlib.contextmanager
def _schema_validation_skipped() -> Iterator[None]:
    """Rasa re-validates every YAML file against its schema while training (seconds).

    ``bot train`` runs ``rasa data validate`` first, so the second check is skipped.
    """
    from rasa.shared.utils import validation

    original = validation.validate_yaml_schema
    validation.validate_yaml_schema = lambda *args, **kwargs: None
    try:
        yield
    finally:
        validation.validate_yaml_schema = original


@contextlib.contextmanager
def _cache_bypassed() -> Iterator[None]:
    """Rasa fingerprints every node's input and output to fill its training cache.

    A finetune retrains every NLU node anyway (the phrases changed), so that
    bookkeeping only costs time: it is skipped (with ``force_training``).
    """
    from rasa.engine.training import hooks

    before, after = hooks.TrainingHook.on_before_node, hooks.TrainingHook.on_after_node
    hooks.TrainingHook.on_before_node = lambda self, *args, **kwargs: {}
    hooks.TrainingHook.on_after_node = lambda self, *args, **kwargs: None
    try:
        yield
    finally:
        hooks.TrainingHook.on_before_node, hooks.TrainingHook.on_after_node = before, after


@contextlib.contextmanager
def _importer_reused(importer: Any, config: str, domain: str, training_files: List[str]) -> Iterator[None]:
    """Rasa's ``train`` reads the domain and every data file again (seconds):
    given the importer that validated the very same files, it gets that one."""
    from rasa.shared.importers.importer import TrainingDataImporter

    if importer is None:
        yield
        return
    original = TrainingDataImporter.__dict__["load_from_config"]  # a staticmethod
    wanted = (config, domain, list(training_files))

    def load_from_config(config_path: Any, domain_path: Any = None, training_data_paths: Any = None,
                         *more: Any, **options: Any) -> Any:
        same_files = (config_path, domain_path, list(training_data_paths or [])) == wanted
        if same_files and not any(more) and not any(options.values()):
            return importer
        return original.__func__(config_path, domain_path, training_data_paths, *more, **options)

    TrainingDataImporter.load_from_config = staticmethod(load_from_config)  # type: ignore[assignment]
    try:
        yield
    finally:
        TrainingDataImporter.load_from_config = original  # type: ignore[assignment]


class FinetuneRefused(RuntimeError):
    """More than phrases changed since the base model: train from scratch."""


def train(
    project_dir: Optional[Path] = None,
    finetune_from: Optional[Path] = None,
    epoch_fraction: float = 0.5,
    log: Callable[[str], None] = print,
    importer: Optional[Any] = None,
) -> Path:
    """Trains a model on the project's data and returns its path.

    ``importer``: Rasa's importer that has just validated the same files
    (``bot.data_validation``), so they are not read again.
    """
    from rasa.model_training import train as rasa_train

    from bot.language import ensure_english_pipeline

    project_dir = Path(project_dir) if project_dir else paths.project_dir()
    ensure_english_pipeline(project_dir / "models" / "spacy-en")
    fingerprint = data_fingerprint(project_dir)
    structure = structure_fingerprint(project_dir)
    if finetune_from is not None:
        base = json.loads(sidecar(finetune_from).read_text()) if sidecar(finetune_from).exists() else {}
        if base.get("structure") != structure:
            raise FinetuneRefused(
                f"the configuration, domain or rules changed since {finetune_from.name}: train without --finetune"
            )
    name = model_name(fingerprint)
    started = time.perf_counter()
    log(f"training model {name} ({'finetuning ' + finetune_from.name if finetune_from else 'from scratch'})")
    domain, config, files = str(project_dir / "domain"), str(project_dir / "config.yml"), training_paths(project_dir)
    with _schema_validation_skipped(), (_cache_bypassed() if finetune_from else contextlib.nullcontext()), \
            _importer_reused(importer, config, domain, files):
        result = rasa_train(
            domain=domain,
            config=config,
            training_files=files,
            output=str(project_dir / "models"),
            fixed_model_name=name,
            model_to_finetune=str(finetune_from) if finetune_from else None,
            finetuning_epoch_fraction=epoch_fraction,
            force_training=finetune_from is not None,
        )
    if result.code != 0 or not result.model:
        raise RuntimeError(f"training failed (code {result.code})")
    seconds = time.perf_counter() - started
    model = Path(result.model)
    sidecar(model).write_text(
        json.dumps(
            {
                "data": fingerprint,
                "structure": structure,
                "trained_in_seconds": round(seconds, 1),
                "finetuned_from": finetune_from.name if finetune_from else None,
            },
            indent=2,
        ),
        encoding="utf-8",
    )
    log(f"trained in {seconds:.1f} s: {model}")
    return model


def ensure_model(project_dir: Optional[Path] = None, log: Callable[[str], None] = print) -> Path:
    """The newest model for the current data, trained first if there is none."""
    project_dir = Path(project_dir) if project_dir else paths.project_dir()
    existing = models_for(data_fingerprint(project_dir), project_dir / "models")
    if existing:
        log(f"model up to date: {existing[0].name}")
        return existing[0]
    return train(project_dir, log=log)
