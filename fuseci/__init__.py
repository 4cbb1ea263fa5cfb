"""fuseci: performance CI for GPU kernel fusion."""

__version__ = "0.1.0"
