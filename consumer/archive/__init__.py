"""The archive format: what a landed object's key and lines look like, in one place.

The lander writes it, the Spark jobs, the demo, the benchmarks and the tests read it;
each of them imports these definitions instead of spelling the format again:

- :mod:`.layout`: object keys (``stream=/dt=/hour=/minute=/shard=/first-last``),
  built and parsed;
- :mod:`.envelope`: the fields of a landed line, in order (``data`` last), a
  reference encoder and the line parser that slices ``data`` as it was written;
- :mod:`.codec`: how an object's lines are stored (gzip): the key's suffix, the glob,
  the magic bytes, compressing, opening and checking an object;
- :mod:`.reader`: an archive folder read with nothing but the codec and the parser above.

Standard library only (and :mod:`consumer.sequence`): Spark executors import it
without the daemon's dependencies. It imports nothing else of the project.
"""
