"""``python -m bot.rasa_main run ...``: Rasa's own command line, started lighter.

- TensorFlow's lite module imports JAX if it can (50 MB and a second of
  start-up) although nothing in a Rasa server uses it: it is hidden here.
- One BLAS thread per process: the sentence encoder multiplies small
  matrices, where a second thread only fights the other workers for the cores.
Everything else is ``rasa`` unchanged (``python -m rasa ...``).
"""
from __future__ import annotations

import os
import sys


def main() -> None:
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    sys.modules.setdefault("jax", None)  # type: ignore[arg-type]  ("import jax" now raises ImportError)
    from rasa.__main__ import main as rasa_main

    sys.argv[0] = "rasa"
    rasa_main()


if __name__ == "__main__":
    main()
