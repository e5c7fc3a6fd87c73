"""CPUNormalization: LS containers' CFS quota scaled by the node's CPU normalization ratio."""
