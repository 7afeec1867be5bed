"""Tests of detector.index: the index contract (contract.py) and the memory index."""
