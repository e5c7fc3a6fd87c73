// The two programs of the test images that scripts/images.py builds (standard library only).
module pykoord.local/node/images

go 1.26.0
