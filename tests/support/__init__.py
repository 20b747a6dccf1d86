"""What the tests share: a process cluster, the bad-input corpus, fault injection, a
recording processor, the S3A jars, a stalled-worker recording, hand-written landed
objects."""
