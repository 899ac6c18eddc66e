"""Baselines and verdicts: the file store, the statistics that decide a
regression, the gate loop, the ledger.
"""
