"""Size arithmetic used by the geometry pass: KV bytes, G1 memory budget, state caches."""
