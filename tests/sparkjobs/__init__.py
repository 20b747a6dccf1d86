"""Tests of the Spark jobs."""
