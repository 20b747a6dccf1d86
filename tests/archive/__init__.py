"""Tests of the archive format."""
