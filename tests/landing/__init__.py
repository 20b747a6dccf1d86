"""Tests of the lander."""
