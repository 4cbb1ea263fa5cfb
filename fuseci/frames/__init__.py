"""Measurements as tidy pandas frames, between the report reader and the judge."""
