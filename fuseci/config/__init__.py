"""What a suite asks for: the model, its YAML loader and validator, policies and shared names.
Nothing here needs a GPU, pandas or CuPy, so the harness and ``fuseci check`` start fast.
"""
