"""Tests of typedrl.ahac."""
