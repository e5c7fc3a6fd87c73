"""NodeNUMAResource: Koordinator's fine-grained CPU orchestration (bound cpusets from NodeResourceTopology)."""
