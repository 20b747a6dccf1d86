"""Landing: a stream's records in an archive, exactly once, one object per run."""
