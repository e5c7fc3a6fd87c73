"""VolumeZone: pods go to the zone (and region) of the volumes they mount."""
