"""Media access and trajectory geometry: ``video`` (probing, frame reading, JPEG and crops) and
``trajectory_ops`` (observation checks, quality signals, duplicate pairs)."""
