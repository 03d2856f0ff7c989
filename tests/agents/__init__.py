"""Tests of typedrl.agents."""
