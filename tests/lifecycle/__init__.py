"""Tests of the shard lifecycle and the worker."""
