"""NodeResourcesFit: resource fit Filter and LeastAllocated / MostAllocated / RequestedToCapacityRatio
scoring (kube-scheduler ``noderesources/fit.go``)."""
