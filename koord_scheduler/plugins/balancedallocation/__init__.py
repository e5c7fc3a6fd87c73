"""NodeResourcesBalancedAllocation: favour nodes whose resource fractions stay close to each other
(kube-scheduler ``noderesources/balanced_allocation.go``)."""
