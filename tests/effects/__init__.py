"""Tests of exactly-once side effects (consumer.effects)."""
