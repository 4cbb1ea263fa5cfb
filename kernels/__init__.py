"""Fused and unfused kernel pairs that the shipped suites reference as ``module:function``."""
