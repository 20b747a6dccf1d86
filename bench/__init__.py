"""Benchmarks of the consumer against a baseline measured in the same run.

Each benchmark starts its own embedded local AWS stack (kinesalite, serialised moto)
on 127.0.0.1, measures the project *and* a baseline on that same stack, and reports
ratios. Nothing here asserts wall-clock times: emulators and CI machines vary too
much for absolute numbers to mean anything on their own.

    python -m bench              # every benchmark
    python -m bench drain        # one worker against a bare GetRecords loop
    python -m bench failover     # kill -9 and SIGTERM hand-offs between processes
    python -m bench --quick      # a short smoke version of the same

Results go to ``bench/results/<name>.json`` (not committed) and a table on stdout.
"""
