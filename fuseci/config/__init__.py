"""What a suite asks for: the model, its YAML loader and validator, policies and shared names.

Nothing here needs a GPU, pandas or CuPy: the harness (which runs under ncu) and ``fuseci
check`` import it, and both start fast.
"""
