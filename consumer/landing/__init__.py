"""Landing: a stream's records in an archive, exactly once, one object per run.

The built-in record processor (:mod:`.lander`) and what it needs: the fast line
encoder, runs and cuts, the object stores (S3, folder, memory), reconciliation
against landed objects. May import the archive format, the processor contract, the
leases' errors and the shared pieces; never the worker or the operator layer.
"""
