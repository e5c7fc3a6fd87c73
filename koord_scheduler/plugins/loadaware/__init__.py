"""LoadAwareScheduling: Filter and Score on NodeMetric usage plus estimates of pods not yet reported
(Koordinator ``pkg/scheduler/plugins/loadaware``), with an optional target-utilization packing score."""
