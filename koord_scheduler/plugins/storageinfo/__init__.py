"""The storage objects the volume plugins read, shared: watched kinds, listers and CSI migration facts."""
