"""``make bench``: the project's server against stock Rasa, measured in one run.

``loadgen`` is the load generator (a separate process on loopback);
``runner`` trains, starts, measures and writes ``docs/benchmarks.md``.
"""
