"""Tests of the operator layer."""
