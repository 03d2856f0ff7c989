"""Tests of typedrl.apg."""
