"""``python -m bot.rasa_main run ...``: Rasa's own command line, started lighter.

- TensorFlow (280 MB and seconds of start-up, imported by Rasa even for
  models that never use it) is replaced by an inert stand-in
  (``bot.without_tensorflow``) unless ``BOT_LOAD_TENSORFLOW=1``; JAX, which
  TensorFlow's lite module imports if it can, is hidden either way.
- One BLAS thread per process: the sentence encoder multiplies small
  matrices, where a second thread only fights the other workers for the cores.
- No Sanic access-log records (built for every request, addresses included).
- Freed memory is given back to the system after the model has loaded and
  then once a minute, and the loaded model is kept out of the garbage
  collector's full collections (``bot.memory``: they took 260-300 ms each).
- A model sent with ``PUT /model`` (``bot promote``) loads in a worker
  thread, so the server keeps answering meanwhile (``bot.model_swap``).
Everything else is ``rasa`` unchanged (``python -m rasa ...``).
"""
from __future__ import annotations

import os
import sys


def main() -> None:
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    # Sanic builds an access-log record (with the visitor's address) for every
    # request even when nothing prints it: 1 % of a message. nginx logs requests
    # without addresses; set SANIC_ACCESS_LOG=true to have them here too.
    os.environ.setdefault("SANIC_ACCESS_LOG", "false")
    sys.modules.setdefault("jax", None)  # type: ignore[arg-type]  ("import jax" now raises ImportError)
    if os.environ.get("BOT_LOAD_TENSORFLOW", "") != "1":
        from bot.without_tensorflow import install

        install()
    from rasa.__main__ import main as rasa_main

    from bot import model_swap
    from bot.memory import freeze_after_model_load, start_trimming

    start_trimming()
    freeze_after_model_load()
    model_swap.install()

    sys.argv[0] = "rasa"
    rasa_main()


if __name__ == "__main__":
    main()
