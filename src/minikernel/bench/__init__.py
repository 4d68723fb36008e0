"""Measuring: timing harness, ceilings, provenance, results files and ncu excerpts."""
