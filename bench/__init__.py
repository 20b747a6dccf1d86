"""Benchmarks of the consumer against a baseline measured in the same run.

Each benchmark starts its own embedded local AWS stack (kinesalite, serialised moto)
on 127.0.0.1, measures the project *and* a baseline on that same stack, and reports
ratios. Nothing here asserts wall-clock times: emulators and CI machines vary too
much for absolute numbers to mean anything on their own.

    python -m bench              # every benchmark, then docs/benchmarks.md rewritten
    python -m bench drain        # one worker against a bare loop and async-kinesis
    python -m bench failover     # kill -9 and SIGTERM hand-offs between processes
    python -m bench requests     # AWS requests per shard-minute against KCL's defaults
    python -m bench --quick      # a short smoke version of the same (docs untouched)
    python -m bench --docs-only  # rewrite docs/benchmarks.md from the saved results

Results go to ``bench/results/<name>.json`` (not committed) and a table on stdout; the
generated blocks of docs/benchmarks.md come from those files (:mod:`bench.docs`).

May import consumer (its operator layer's harness included) and sparkjobs; never the
tests (tests/test_layout.py). The test-archive generator (:mod:`bench.archives`) lives
here so that both the benchmarks and the tests use it.
"""
