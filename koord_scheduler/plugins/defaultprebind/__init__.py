"""The DefaultPreBind plugin: PreBind's metadata changes sent as one patch per pod."""
