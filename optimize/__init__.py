"""Optimization: DSPy compiles, the joint knob x demonstration search, the strategy race,
annotation teaching and Optuna tuning."""
