"""LowNodeLoad, Koordinator's load-aware descheduling (``pkg/descheduler/framework/plugins/loadaware``):
the arithmetic (:mod:`.policy`), one node pool's balancing plan (:mod:`.balance`), the anomaly detector
(:mod:`.anomaly`) and the plugin that turns NodeMetrics and pods into PodMigrationJobs (:mod:`.plugin`)."""
