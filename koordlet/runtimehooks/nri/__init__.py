"""koordlet's NRI plugin: the ttrpc protocol over containerd's NRI socket and the events it answers."""
