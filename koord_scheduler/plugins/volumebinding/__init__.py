"""VolumeBinding: pods with PersistentVolumeClaims are scheduled only where their bound volumes allow."""
