"""Numbers as each language writes them: 4.36 TB/s in English, 4,36 TB/s in Spanish.

Spanish uses a decimal comma and (for numbers of five digits or more) a thin space between
groups of three; English a decimal point and a comma between groups.
"""

from __future__ import annotations

THIN_NBSP = "\u202f"  # narrow no-break space: keeps "4,36 TB/s" on one line


def number(x: float, lang: str, digits: int = 2, *, group: bool = True) -> str:
    s = f"{x:,.{digits}f}" if group else f"{x:.{digits}f}"
    if lang == "es":
        intpart, _, frac = s.partition(".")
        digits_only = intpart.replace(",", "")
        if group and len(digits_only.lstrip("-")) >= 5:
            intpart = intpart.replace(",", THIN_NBSP)
        else:
            intpart = digits_only
        s = intpart + ("," + frac if frac else "")
    return s


def integer(n: int, lang: str) -> str:
    return number(n, lang, 0)


def sig(x: float, lang: str, figures: int = 3) -> str:
    """``x`` with about ``figures`` significant figures (no exponent for everyday values)."""
    if x == 0:
        return "0"
    mag = len(str(int(abs(x)))) if abs(x) >= 1 else 0
    digits = max(figures - mag, 0)
    if abs(x) < 1:
        import math

        digits = figures - 1 - math.floor(math.log10(abs(x)))
    return number(x, lang, digits)


def bandwidth(gbps: float, lang: str) -> str:
    """GB/s below 1000, TB/s above."""
    if gbps >= 1000:
        return f"{number(gbps / 1000, lang, 2)}{THIN_NBSP}TB/s"
    return f"{sig(gbps, lang)}{THIN_NBSP}GB/s"


def tflops(t: float, lang: str) -> str:
    return f"{sig(t, lang)}{THIN_NBSP}TFLOP/s"


def duration_us(us: float, lang: str) -> str:
    if us >= 1000:
        return f"{sig(us / 1000, lang)}{THIN_NBSP}ms"
    return f"{sig(us, lang)}{THIN_NBSP}µs"


def seconds(s: float, lang: str) -> str:
    return f"{sig(s, lang)}{THIN_NBSP}s"


def percent(frac: float, lang: str, digits: int = 1) -> str:
    return f"{number(100 * frac, lang, digits)}{THIN_NBSP}%"


def ratio(r: float, lang: str) -> str:
    return f"{number(r, lang, 2)}×"


def bytes_(n: float, lang: str) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{sig(n / scale, lang)}{THIN_NBSP}{unit}"
    return f"{integer(int(n), lang)}{THIN_NBSP}B"


def size(n: int) -> str:
    """An element count as a power of two where it is one (2^28), else plainly."""
    if n > 0 and n & (n - 1) == 0 and n >= 1024:
        return f"2<sup>{n.bit_length() - 1}</sup>"
    return str(n)


def shape(shape: list, lang: str) -> str:
    parts = [size(s) if isinstance(s, int) else str(s) for s in shape]
    return " × ".join(parts)


_KNOB_WORDS = {  # how a page names a Triton constexpr knob's values, per language
    ("RELOAD", True): {"en": "row read twice", "es": "fila leída dos veces"},
    ("RELOAD", False): {"en": "row kept in registers", "es": "fila en registros"},
}


def launch_config(config: dict, lang: str) -> str:
    """An autotuned launch config in words: {"num_warps": 2, "RELOAD": True} -> "2 warps, row
    read twice" ("2 warps, fila leída dos veces"); a knob without words shows as KEY=value."""
    parts = []
    if "num_warps" in config:
        w = config["num_warps"]
        parts.append(f"{w} warp" + ("s" if w != 1 else ""))
    for key, val in config.items():
        if key != "num_warps":
            words = _KNOB_WORDS.get((key, val))
            parts.append(words[lang if lang in words else "en"] if words else f"{key}={val}")
    return ", ".join(parts)
