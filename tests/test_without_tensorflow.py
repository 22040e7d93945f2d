"""The server runs without TensorFlow (an inert stand-in), and refuses models that need it."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from bot.without_tensorflow import NEEDS_TENSORFLOW


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def test_rasa_imports_with_the_stand_in_and_far_less_memory() -> None:
    result = run("""
        import sys
        from bot.without_tensorflow import install
        assert install()
        import rasa.core.agent, rasa.core.run, rasa.engine.recipes.default_components
        import tensorflow
        assert tensorflow.__bot_stub__
        rss = int(open('/proc/self/status').read().split('VmRSS:')[1].split()[0]) // 1024
        print(rss)
    """)
    assert result.returncode == 0, result.stderr[-2000:]
    assert int(result.stdout.split()[-1]) < 350  # about 480 MB with the real TensorFlow


@pytest.mark.parametrize("module", NEEDS_TENSORFLOW[:1] + NEEDS_TENSORFLOW[4:5])
def test_a_model_that_needs_tensorflow_is_refused_with_a_clear_message(module: str) -> None:
    result = run(f"""
        from bot.without_tensorflow import install, check_components
        install()
        import importlib
        component = [c for c in vars(importlib.import_module("{module}")).values()
                     if isinstance(c, type) and c.__module__ == "{module}"][0]
        try:
            check_components([component])
        except RuntimeError as error:
            print(error)
    """)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "BOT_LOAD_TENSORFLOW=1" in result.stdout


def test_training_and_evaluation_skip_tensorflow_only_for_configs_that_need_none(tmp_path) -> None:
    from bot.without_tensorflow import config_needs_tensorflow
    from tests.conftest import PROJECT

    assert not config_needs_tensorflow(PROJECT / "config.yml")
    assert config_needs_tensorflow(PROJECT / "bench" / "baseline" / "config.yml")
    custom = tmp_path / "config.yml"
    custom.write_text("pipeline:\n- name: WhitespaceTokenizer\n- name: some_package.MyClassifier\npolicies:\n- name: RulePolicy\n")
    assert config_needs_tensorflow(custom), "an unknown custom component might import TensorFlow"
    custom.write_text("pipeline:\n- name: WhitespaceTokenizer\npolicies:\n- name: TEDPolicy\n")
    assert config_needs_tensorflow(custom)
    assert config_needs_tensorflow(tmp_path / "missing.yml")
