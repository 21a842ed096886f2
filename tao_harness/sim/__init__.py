"""Discrete-event simulator: an event heap driving the policies and the engine model in virtual time."""
