"""Measurement strategies (how samples are taken) and stopping rules (when to stop), kept apart
so each can be tested alone, as nvbench keeps its measurements and stopping criteria apart."""
