"""BatchResource: BE pod and container cgroups from their batch requests and limits."""
