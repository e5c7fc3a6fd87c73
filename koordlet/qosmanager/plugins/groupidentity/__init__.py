"""GroupIdentity: cpu.bvt_warp_ns per QoS class (Koordinator runtime hook hooks/groupidentity)."""
