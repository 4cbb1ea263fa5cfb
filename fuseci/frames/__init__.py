"""Measurements as tidy pandas frames: the report read into one row per kernel, aggregated per
variant, and the fusion gains. Frames live between the report reader and the judge only."""
