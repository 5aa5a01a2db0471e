"""Pure decisions over observed state (no I/O): roll order, batches, safety gates, quorum judgement."""
