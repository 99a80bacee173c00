"""VTrajEmbed (Fast and Slow branches over frozen crop features, mask-guided loss): ``model`` holds
the config, the building blocks, the model and its builder; ``data`` packs a snapshot's tracks."""
