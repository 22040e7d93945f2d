"""Start a Rasa server without importing TensorFlow, for models that use none of it.

Rasa 3.6 imports TensorFlow (and, through it, Keras and JAX) in modules
every server loads, such as the policy base class and the registry of
built-in components, even when the model has no TensorFlow component. That
import is 280 MB of memory and seconds of start-up per server process. This
project's pipeline and policy (spaCy tokens, our own classifier, RulePolicy)
never call it, so ``bot.rasa_main`` installs an import hook that answers
``import tensorflow`` (and keras, tensorflow_addons, ...) with an inert
stand-in: classes can subclass it and decorators pass functions through,
but nothing runs. ``bot.graph_runner`` refuses to load a model whose graph
holds a component that needs the real library; ``BOT_LOAD_TENSORFLOW=1``
switches the stand-in off.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, Optional, Sequence

#: Top-level packages answered by the stand-in.
STUBBED = ("tensorflow", "tensorflow_addons", "tensorflow_hub", "tensorflow_text", "keras", "tensorboard", "tf_keras")
#: Rasa modules whose components really need TensorFlow.
NEEDS_TENSORFLOW = (
    "rasa.nlu.classifiers.diet_classifier",
    "rasa.nlu.selectors.response_selector",
    "rasa.nlu.featurizers.dense_featurizer.lm_featurizer",
    "rasa.nlu.featurizers.dense_featurizer.convert_featurizer",
    "rasa.core.policies.ted_policy",
    "rasa.core.policies.unexpected_intent_policy",
)


#: Components (by their config name) that need the real TensorFlow.
TENSORFLOW_COMPONENTS = {
    "DIETClassifier", "ResponseSelector", "LanguageModelFeaturizer", "ConveRTFeaturizer",
    "TEDPolicy", "UnexpecTEDIntentPolicy",
}


def config_needs_tensorflow(config_path: Any) -> bool:
    """True if the model configuration may need TensorFlow.

    Rasa's TensorFlow components do; this project's own (``bot.``) do not;
    any other custom component might, so it counts as needing it too.
    """
    from pathlib import Path

    import yaml

    try:
        config = yaml.safe_load(Path(config_path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return True
    names = [str(entry.get("name", "")) for key in ("pipeline", "policies") for entry in config.get(key) or [] if isinstance(entry, dict)]
    return any(n in TENSORFLOW_COMPONENTS or ("." in n and not n.startswith("bot.")) for n in names)


def install_for_config(config_path: Any) -> bool:
    """The stand-in for a command that trains or loads a model of ``config_path`` in this
    process (``python -m bot train``, ``evaluate``), unless that model may need
    TensorFlow or ``BOT_LOAD_TENSORFLOW=1``. True when it is in place."""
    import os

    if os.environ.get("BOT_LOAD_TENSORFLOW", "") == "1" or config_needs_tensorflow(config_path):
        return False
    sys.modules.setdefault("jax", None)  # type: ignore[arg-type]  (TensorFlow's lite module imports it if it can)
    return install()


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


class _StubMeta(type):
    """Stand-in classes: any attribute is another stand-in class; calling one gives an inert object."""

    def __getattr__(cls, name: str) -> Any:
        if _dunder(name):
            raise AttributeError(name)
        return stub_class(name)

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls.__dict__.get("_is_stub"):
            return Inert()
        return super().__call__(*args, **kwargs)

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    __ror__ = __or__


def stub_class(name: str) -> type:
    return _StubMeta(name, (), {"_is_stub": True, "__module__": "tensorflow"})


class Inert:
    """What calling the stand-in returns: decorators give back the function, everything else is inert."""

    def __getattr__(self, name: str) -> Any:
        if _dunder(name):
            raise AttributeError(name)
        return Inert()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return Inert()

    def __getitem__(self, item: Any) -> "Inert":
        return Inert()

    def __iter__(self) -> Any:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return False

    def __mro_entries__(self, bases: tuple) -> tuple:
        return (stub_class("Base"),)


class _StubModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if _dunder(name):
            raise AttributeError(name)
        return stub_class(name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Optional[Sequence[str]], target: Any = None) -> Any:
        if fullname.split(".")[0] in STUBBED:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _StubModule(spec.name)
        module.__path__ = []  # type: ignore[attr-defined]
        module.__version__ = "2.12.0"  # type: ignore[attr-defined]
        module.__bot_stub__ = True  # type: ignore[attr-defined]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def install() -> bool:
    """Installs the stand-in unless TensorFlow is already imported; True when it is in place."""
    loaded = list(sys.modules.items())  # a copy: imports may run meanwhile
    if any(name.split(".")[0] in STUBBED for name, module in loaded if module is not None
           and not getattr(module, "__bot_stub__", False)):
        return False
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    return True


def active() -> bool:
    return getattr(sys.modules.get("tensorflow"), "__bot_stub__", False) or any(
        isinstance(f, _Finder) for f in sys.meta_path
    )


def check_components(component_classes: Sequence[type]) -> None:
    """Refuses a model that needs TensorFlow while the stand-in is in place."""
    if not active():
        return
    needing = sorted({c.__name__ for c in component_classes if c.__module__.startswith(NEEDS_TENSORFLOW)})
    if needing:
        raise RuntimeError(
            f"this model uses {', '.join(needing)}, which need TensorFlow; start the server with "
            "BOT_LOAD_TENSORFLOW=1"
        )
