"""Parts used by more than one strategy: the per-question search session with the test-time
modules (de-duplication, contextualization memory), the token-budgeted Top-K_max selection, and
the reading of lists a model wrote."""
