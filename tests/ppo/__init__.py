"""Tests of typedrl.ppo."""
