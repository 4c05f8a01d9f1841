"""The fused Hadamard + FP8 kernel divides by the descale with Markstein's correction instead of
``div_rn``: ``r = RN(1/d)``, ``q = RN(y r)``, ``q' = RN(q + RN(y - q d) r)`` (two FMAs). Checked
here in exact rational arithmetic against the correctly rounded fp32 quotient ``RN(y / d)``, on
random quotients and on ones next to an e4m3 rounding midpoint (where one fp32 ulp decides the
FP8 code), for descales ``d = RN(amax / 448)`` as the kernel forms them."""

import random
import struct
from fractions import Fraction as F

import pytest

TWO = F(2)


def rn32(x: F) -> F:
    """x rounded to the nearest fp32 value, ties to even (normal and subnormal; no overflow)."""
    if x == 0:
        return F(0)
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    e += (TWO ** (e + 1) <= a) - (TWO ** e > a)
    e = max(e, -126)
    quantum = TWO ** (e - 23)
    n = a / quantum
    whole = n.numerator // n.denominator
    rest = n - whole
    whole += rest > F(1, 2) or (rest == F(1, 2) and whole % 2 == 1)
    return (1 if x > 0 else -1) * whole * quantum


def f32(v: float) -> F:
    return F(struct.unpack("f", struct.pack("f", v))[0])


def markstein(y: F, d: F) -> F:
    r = rn32(1 / d)
    q = rn32(y * r)
    return rn32(rn32(y - q * d) * r + q)  # fma(fma(-q, d, y), r, q): each fma rounds once


def test_rn32_matches_the_hardware_cast():
    rng = random.Random(1)
    for _ in range(500):
        v = rng.uniform(-1e3, 1e3) * 2.0 ** rng.randint(-140, 60)
        assert rn32(F(v)) == f32(v)


@pytest.mark.parametrize("seed", [0, 1])
def test_markstein_quotient_is_the_correctly_rounded_one(seed):
    rng = random.Random(seed)
    checked = 0
    for i in range(1500):
        amax = f32(rng.uniform(1e-3, 1e3) * 2.0 ** rng.randint(-40, 40))
        d = rn32(amax / 448)
        if i % 2:  # next to an e4m3 midpoint: (m + 1/2) 2^k d, nudged by a few fp32 ulps
            m, k = rng.randint(8, 15), rng.randint(-9, 5)
            y = rn32((m + F(1, 2)) * TWO ** (k - 3) * d * (1 + F(rng.randint(-4, 4), 2 ** 24)))
            if abs(y) > amax:
                continue
        else:
            y = f32(float(amax) * rng.uniform(-1, 1))
        assert markstein(y, d) == rn32(y / d), (float(y), float(d))
        checked += 1
    assert checked > 1000


def test_markstein_on_operands_scaled_by_2_64_is_exact_for_tiny_descales():
    """The "rows" kernel divides a row whose descale is below 2^-100 (subnormal ones included) as
    markstein(y 2^64, d 2^64): both products are exact and the quotient is y / d, and in that range
    the correction gives the correctly rounded quotient, next to e4m3 midpoints too."""
    rng = random.Random(3)
    checked = 0
    for dexp in range(-149, -99):
        for _ in range(40):
            d = rn32(F(rng.randint(1, 2 ** 24 - 1), 2 ** 23) * TWO ** dexp)
            if d == 0:
                continue
            m = rng.choice([F(1, 2), F(3, 2), F(5, 2), F(7, 2), F(rng.randint(1, 448 * 16), 16)])
            y = rn32(m * TWO ** rng.randint(-9, 0) * d * (1 + F(rng.randint(-6, 6), 2 ** 24)))
            assert markstein(y * TWO ** 64, d * TWO ** 64) == rn32(y / d), (float(y), float(d))
            checked += 1
    assert checked > 1500
