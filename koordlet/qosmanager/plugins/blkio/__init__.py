"""BlkIOReconcile: blkio weights and throttles per QoS class (Koordinator qosmanager/plugins/blkio)."""
