"""Tests of deployment files, images and monitoring."""
