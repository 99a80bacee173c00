"""Colour naming for the describers: the CSS/X11 colour names of ``webcolors``, grouped into the
basic colour terms, matched in CIELAB under CIEDE2000 with ``colour-science``, after a grey-world
white balance.

The names owe nothing to any scene's drawing: the reference colours are the 147 CSS Color Module
Level 3 / X11 names (``webcolors.names("css3")``), and :data:`BASIC_TERMS` groups each of them
into one of the eleven basic colour terms of Berlin and Kay (*Basic Color Terms*, 1969): black,
white, grey, red, orange, yellow, green, blue, purple, pink, brown. A pixel takes the term of its
nearest CSS name (CIEDE2000, Sharma, Wu and Dalal 2005, as ``colour.delta_E(method="CIE 2000")``
computes it); pixels are first quantised to 5 bits per channel, and each quantised colour is
named once per process (a lookup filled on demand), so naming a region costs one ``np.unique``
and a table read.

White balance: grey-world (Buchsbaum 1980) over the near-grey pixels of a reference image (the
caller's choice: the scene's median background): each channel is scaled so that their channel
means are equal. Plain grey-world over every pixel takes a scene that really is mostly one
colour (a lawn, warm paving) for a coloured light and turns red clothing brown; restricting it
to low-saturation pixels and clipping the gains to ``[1 / max_gain, max_gain]`` keeps it to
correcting the light.
"""
from __future__ import annotations

import numpy as np
import webcolors

# The grouping of the CSS/X11 names into the basic terms. Rule: a name goes to the term of its head
# word (``darkolivegreen`` is green, ``lightcoral`` red); names without one go to the term most
# speakers use for the swatch: the near-whites (``linen``, ``seashell``, ``lavender``) to white,
# the yellowish and reddish browns and tans (``wheat``, ``peru``, ``goldenrod``) to brown,
# magenta to pink, the blue-greens (teal, cyan, turquoise) to blue, the violets and slate blues to
# purple. Every one of the 147 names is in exactly one group (checked on import).
BASIC_TERMS: dict[str, tuple[str, ...]] = {
    "black": ("black",),
    "white": ("white", "snow", "ghostwhite", "whitesmoke", "floralwhite", "ivory", "mintcream", "azure",
              "aliceblue", "seashell", "honeydew", "linen", "oldlace", "lavenderblush", "lavender",
              "antiquewhite", "papayawhip", "blanchedalmond", "cornsilk"),
    "grey": ("gray", "grey", "darkgray", "darkgrey", "dimgray", "dimgrey", "gainsboro", "lightgray", "lightgrey",
             "silver", "slategray", "slategrey", "lightslategray", "lightslategrey", "darkslategray",
             "darkslategrey"),
    "red": ("red", "darkred", "firebrick", "crimson", "indianred", "maroon", "tomato", "lightcoral"),
    "orange": ("orange", "darkorange", "orangered", "coral", "salmon", "darksalmon", "lightsalmon"),
    "yellow": ("yellow", "gold", "lightyellow", "lemonchiffon", "lightgoldenrodyellow", "palegoldenrod", "khaki",
               "darkkhaki"),
    "green": ("green", "darkgreen", "lime", "limegreen", "lawngreen", "chartreuse", "greenyellow", "yellowgreen",
              "forestgreen", "seagreen", "mediumseagreen", "darkseagreen", "lightgreen", "palegreen", "springgreen",
              "mediumspringgreen", "olive", "olivedrab", "darkolivegreen", "aquamarine", "mediumaquamarine"),
    "blue": ("blue", "navy", "darkblue", "mediumblue", "midnightblue", "royalblue", "dodgerblue", "deepskyblue",
             "skyblue", "lightskyblue", "lightblue", "powderblue", "steelblue", "lightsteelblue", "cornflowerblue",
             "cadetblue", "aqua", "cyan", "lightcyan", "paleturquoise", "turquoise", "mediumturquoise",
             "darkturquoise", "darkcyan", "teal", "lightseagreen"),
    "purple": ("purple", "indigo", "darkviolet", "darkorchid", "mediumorchid", "mediumpurple", "blueviolet",
               "darkmagenta", "slateblue", "mediumslateblue", "darkslateblue", "thistle", "plum", "violet",
               "orchid"),
    "pink": ("pink", "lightpink", "hotpink", "deeppink", "palevioletred", "mediumvioletred", "magenta", "fuchsia",
             "mistyrose"),
    "brown": ("brown", "saddlebrown", "sienna", "chocolate", "peru", "sandybrown", "burlywood", "tan", "rosybrown",
              "goldenrod", "darkgoldenrod", "wheat", "navajowhite", "moccasin", "bisque", "peachpuff", "beige"),
}
TERMS: tuple[str, ...] = tuple(BASIC_TERMS)
_QUANT_BITS = 5                                  # bits kept per channel before naming


def _check_grouping() -> tuple[list[str], np.ndarray]:
    css = list(webcolors.names("css3"))
    grouped = [n for names in BASIC_TERMS.values() for n in names]
    missing, extra = sorted(set(css) - set(grouped)), sorted(set(grouped) - set(css))
    if missing or extra or len(grouped) != len(set(grouped)):
        raise ValueError(f"BASIC_TERMS must group every CSS name once: missing {missing}, unknown {extra}")
    term_of = {n: TERMS.index(t) for t, names in BASIC_TERMS.items() for n in names}
    return css, np.array([term_of[n] for n in css], np.int64)


CSS_NAMES, CSS_TERM_INDEX = _check_grouping()   # [N] names, [N] index into TERMS


def _colour():
    # colour-science takes ~2 s to import; only a describer that names a colour pays for it
    import colour
    return colour


def srgb_to_lab(rgb: np.ndarray) -> np.ndarray:
    """[..., 3] sRGB in 0..1 -> [..., 3] CIELAB (D65), by colour-science."""
    colour = _colour()
    return colour.XYZ_to_Lab(colour.sRGB_to_XYZ(np.asarray(rgb, np.float64)))


def grey_world_gains(reference_bgr: np.ndarray, max_gain: float = 1.5, max_saturation: float = 0.2,
                     min_share: float = 0.05) -> np.ndarray:
    """[3] per-channel (B, G, R) gains that make the channel means of the reference image's
    near-grey pixels equal, clipped to ``[1 / max_gain, max_gain]``.

    Only pixels of HSV saturation below ``max_saturation`` (and neither black nor clipped) are
    averaged: grey-world over the pixels that are plausibly grey under the light, so a scene that
    is mostly one colour (a lawn, warm paving) does not pose as the illuminant. Fewer than
    ``min_share`` such pixels: no correction (gains 1)."""
    pix = np.asarray(reference_bgr, np.float64).reshape(-1, 3)                  # [P, 3]
    hi, lo = pix.max(axis=1), pix.min(axis=1)                                    # [P]
    grey = (hi > 20) & (hi < 250) & (hi - lo <= max_saturation * hi)            # [P]
    if grey.sum() < min_share * len(pix):
        return np.ones(3)
    means = pix[grey].mean(axis=0)                                               # [3]
    gains = means.mean() / np.maximum(means, 1e-6)                               # [3]
    return np.clip(gains, 1.0 / max_gain, max_gain)


class ColourNamer:
    """Basic colour terms of BGR pixels (see the module docstring). One per process is enough:
    the lookup of quantised colours is filled as colours are met."""

    def __init__(self) -> None:
        rgb = np.array([webcolors.hex_to_rgb(webcolors.name_to_hex(n)) for n in CSS_NAMES], np.float64) / 255
        self.css_lab = srgb_to_lab(rgb)                                      # [N, 3]
        levels = 1 << _QUANT_BITS
        self._lookup = np.full(levels ** 3, -1, np.int64)                   # [Q] term index, -1: not named yet

    def _codes(self, bgr: np.ndarray) -> np.ndarray:
        q = np.asarray(bgr, np.uint8).reshape(-1, 3) >> (8 - _QUANT_BITS)   # [P, 3]
        q = q.astype(np.int64)
        return (q[:, 2] << (2 * _QUANT_BITS)) | (q[:, 1] << _QUANT_BITS) | q[:, 0]   # [P] r, g, b

    def _fill(self, codes: np.ndarray) -> None:
        todo = codes[self._lookup[codes] < 0]                                # [U]
        if not len(todo):
            return
        mask, step = (1 << _QUANT_BITS) - 1, 1 << (8 - _QUANT_BITS)
        rgb = np.stack([(todo >> (2 * _QUANT_BITS)) & mask, (todo >> _QUANT_BITS) & mask, todo & mask], 1)
        lab = srgb_to_lab((rgb * step + step / 2) / 255.0)                   # [U, 3] bin centres
        d = _colour().delta_E(lab[:, None, :], self.css_lab[None, :, :], method="CIE 2000")   # [U, N]
        self._lookup[todo] = CSS_TERM_INDEX[d.argmin(axis=1)]

    def terms(self, bgr: np.ndarray, gains: np.ndarray | None = None) -> np.ndarray:
        """[P] index into :data:`TERMS` of each pixel of ``bgr`` [..., 3] (uint8), after multiplying
        its channels by ``gains`` [3] (a white balance) when given."""
        pix = np.asarray(bgr).reshape(-1, 3)
        if gains is not None:
            pix = np.clip(pix.astype(np.float32) * np.asarray(gains, np.float32), 0, 255)
        codes = self._codes(pix.astype(np.uint8))                          # [P]
        uniq, inverse = np.unique(codes, return_inverse=True)
        self._fill(uniq)
        return self._lookup[uniq][inverse.reshape(-1)]

    def shares(self, bgr: np.ndarray, gains: np.ndarray | None = None) -> np.ndarray:
        """[T] share of the pixels named by each basic term."""
        idx = self.terms(bgr, gains)
        return np.bincount(idx, minlength=len(TERMS)) / max(len(idx), 1)


_NAMER: ColourNamer | None = None


def colour_namer() -> ColourNamer:
    """The process's namer (its lookup is shared by every describer and scorer)."""
    global _NAMER
    if _NAMER is None:
        _NAMER = ColourNamer()
    return _NAMER
