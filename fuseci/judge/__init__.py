"""Judging what was measured: the verdict model, the checks, the comparison with a baseline
(or with another run), and the baseline model. Pure: nothing here prints or touches files."""
