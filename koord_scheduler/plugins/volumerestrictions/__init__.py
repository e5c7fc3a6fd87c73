"""VolumeRestrictions: inline disks that cannot be shared, and ReadWriteOncePod claims in use."""
