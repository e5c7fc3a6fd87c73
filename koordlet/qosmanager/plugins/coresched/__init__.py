"""CoreSched: core-scheduling cookies per group and cpu.idle per QoS class (Koordinator hooks/coresched)."""
