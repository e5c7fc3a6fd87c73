"""The ElasticQuota model shared by the ElasticQuota plugin, its status controller and its webhook: quota
trees, runtime quota, pod-to-quota mapping, validation and over-use revocation."""
