"""Tests of the reading side."""
