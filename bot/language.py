"""Builds the project's own English spaCy pipeline (no pretrained model can be downloaded).

``spacy.blank("en")`` gives spaCy's English tokenizer; a lookup lemmatizer
from spacy-lookups-data adds lemmas. Rasa's ``SpacyNLP`` loads the saved
folder, so ``rasa train`` and ``rasa run`` never reach for a model hub.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

from bot import paths

#: Bump when the way the pipeline is built changes, so ``ensure`` rebuilds it.
PIPELINE_VERSION = "1"
STAMP = "bot-pipeline-version"


def build_english_pipeline(target: Optional[Path] = None) -> Path:
    """Writes a blank English pipeline with a lookup lemmatizer to ``target``."""
    import spacy

    target = Path(target) if target else paths.spacy_model_dir()
    nlp = spacy.blank("en")
    nlp.add_pipe("lemmatizer", config={"mode": "lookup"})
    nlp.initialize()
    nlp.meta["name"] = "bot_en_lookup"
    nlp.meta["description"] = "Blank English tokenizer + lookup lemmatizer, built by bot.language"
    if target.exists():
        shutil.rmtree(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    nlp.to_disk(target)
    (target / STAMP).write_text(PIPELINE_VERSION, encoding="utf-8")
    return target


def is_built(target: Optional[Path] = None) -> bool:
    target = Path(target) if target else paths.spacy_model_dir()
    stamp = target / STAMP
    return stamp.exists() and stamp.read_text(encoding="utf-8").strip() == PIPELINE_VERSION


def ensure_english_pipeline(target: Optional[Path] = None) -> Path:
    """Builds the pipeline unless an up-to-date one is already there."""
    target = Path(target) if target else paths.spacy_model_dir()
    if not is_built(target):
        build_english_pipeline(target)
    return target
