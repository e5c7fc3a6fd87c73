"""BECPUThrottleReporter: exports how much BE pods are being CPU-throttled."""
