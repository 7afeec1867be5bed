"""Tests of detector.stream."""
