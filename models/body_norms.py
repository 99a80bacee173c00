"""Where clothing sits in a person's box, from published body proportions. Nothing here comes from
a scene's drawing.

Segment heights as fractions of stature are Drillis and Contini's ("Body segment parameters",
Technical Report 1166.03, New York University, 1966), as tabulated in Winter, *Biomechanics and
Motor Control of Human Movement* (4th ed., Wiley 2009, Fig. 4.1). A standing or walking person's box
spans the stature, so a level at ``h`` of the stature lies ``1 - h`` of the box height below its top.
"""
from __future__ import annotations

# levels above the ground, fractions of stature (Drillis and Contini 1966)
SHOULDER = 0.818
HIP = 0.530                                      # greater trochanter
KNUCKLE = 0.377                                  # the hands hanging at the sides
KNEE = 0.285
ANKLE = 0.039


def rows_below_top(level: float) -> float:
    """A level (fraction of stature above the ground) as a fraction of the box height from its top."""
    return round(1.0 - level, 3)


# The rows read as the upper garment: inside the torso, which runs from the shoulders (0.182 of the
# box from its top) to the hips (0.470), clear of the neck and collar above and the belt below.
UPPER_GARMENT_ROWS = (0.22, 0.46)
# The rows read as the lower garment: inside the legs, from the hips (0.470) to the ankles (0.961),
# from about the hanging hands' knuckles (0.623) to above the middle of the shin (0.838), where a
# stride opens a gap between the feet.
LOWER_GARMENT_ROWS = (0.60, 0.80)
