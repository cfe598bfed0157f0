"""Arithmetic for the sample upstream's synthetic technical indicators and analytics.

Pure functions on lists of floats: no I/O, no state, no randomness. ``progressive_mcp.offline.sample_upstream`` feeds
them its synthetic price bars and turns the results into Alpha Vantage-shaped answers. Every function takes
oldest-first inputs and returns a list of the same length, with ``None`` where the indicator has no value yet
(its lookback), so a caller can line the results up with the bars' timestamps.

The formulas follow the usual textbook definitions (Wilder smoothing for RSI, ATR and the directional
movement family; EMAs seeded with a simple average). The Hilbert-transform family (HT_*) and MAMA are
simplified versions of Ehlers' methods: their values are plausible, in the usual ranges, but not TA-Lib's.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence

Series = list[float | None]


def _start(values: Sequence[float | None]) -> int:
    """Index of the first value that is not None (len(values) when there is none)."""
    for i, v in enumerate(values):
        if v is not None:
            return i
    return len(values)


def _dense(values: Sequence[float | None]) -> tuple[int, list[float]]:
    """Where the values start, and the values from there on (which must all be numbers)."""
    i = _start(values)
    return i, [float(v) for v in values[i:] if v is not None]


def _padded(offset: int, out: Sequence[float | None], length: int) -> Series:
    result: Series = [None] * offset
    result.extend(out)
    return result[:length] + [None] * (length - len(result))


def on_tail(values: Sequence[float | None], fn: Callable[[list[float]], Series]) -> Series:
    """Apply `fn` to the part of `values` after its leading Nones, and line the result back up."""
    offset, dense = _dense(values)
    return _padded(offset, fn(dense) if dense else [], len(values))


# --------------------------------------------------------------------------------------------------
# Moving averages (matype 0-8)
# --------------------------------------------------------------------------------------------------


def sma(values: Sequence[float | None], period: int) -> Series:
    def run(xs: list[float]) -> Series:
        out: Series = [None] * len(xs)
        total = 0.0
        for i, x in enumerate(xs):
            total += x
            if i >= period:
                total -= xs[i - period]
            if i >= period - 1:
                out[i] = total / period
        return out

    return on_tail(values, run)


def ema(values: Sequence[float | None], period: int, alpha: float | None = None) -> Series:
    """Exponential average seeded with the simple average of the first `period` values."""
    k = alpha if alpha is not None else 2.0 / (period + 1)

    def run(xs: list[float]) -> Series:
        out: Series = [None] * len(xs)
        if len(xs) < period:
            return out
        level = sum(xs[:period]) / period
        out[period - 1] = level
        for i in range(period, len(xs)):
            level += k * (xs[i] - level)
            out[i] = level
        return out

    return on_tail(values, run)


def wma(values: Sequence[float | None], period: int) -> Series:
    weight_sum = period * (period + 1) / 2

    def run(xs: list[float]) -> Series:
        out: Series = [None] * len(xs)
        for i in range(period - 1, len(xs)):
            out[i] = sum(xs[i - period + 1 + j] * (j + 1) for j in range(period)) / weight_sum
        return out

    return on_tail(values, run)


def dema(values: Sequence[float | None], period: int) -> Series:
    e1 = ema(values, period)
    e2 = ema(e1, period)
    return [None if a is None or b is None else 2 * a - b for a, b in zip(e1, e2, strict=True)]


def tema(values: Sequence[float | None], period: int) -> Series:
    e1 = ema(values, period)
    e2 = ema(e1, period)
    e3 = ema(e2, period)
    return [
        None if a is None or b is None or c is None else 3 * a - 3 * b + c for a, b, c in zip(e1, e2, e3, strict=True)
    ]


def trima(values: Sequence[float | None], period: int) -> Series:
    first = (period + 1) // 2 if period % 2 else period // 2
    second = period + 1 - first
    return sma(sma(values, first), second)


def kama(values: Sequence[float | None], period: int) -> Series:
    """Kaufman's adaptive average: smoothing between 2- and 30-period EMAs by the efficiency ratio."""
    fast, slow = 2.0 / 3.0, 2.0 / 31.0

    def run(xs: list[float]) -> Series:
        out: Series = [None] * len(xs)
        if len(xs) <= period:
            return out
        level = xs[period - 1]
        for i in range(period, len(xs)):
            direction = abs(xs[i] - xs[i - period])
            volatility = sum(abs(xs[j] - xs[j - 1]) for j in range(i - period + 1, i + 1))
            ratio = direction / volatility if volatility else 0.0
            level += (ratio * (fast - slow) + slow) ** 2 * (xs[i] - level)
            out[i] = level
        return out

    return on_tail(values, run)


def t3(values: Sequence[float | None], period: int, vfactor: float = 0.7) -> Series:
    """Tillson's T3: a generalised DEMA applied three times."""

    def gd(xs: Sequence[float | None]) -> Series:
        e1 = ema(xs, period)
        e2 = ema(e1, period)
        return [
            None if a is None or b is None else a * (1 + vfactor) - b * vfactor for a, b in zip(e1, e2, strict=True)
        ]

    return gd(gd(gd(values)))


def mama(values: Sequence[float | None], fastlimit: float, slowlimit: float) -> tuple[Series, Series]:
    """MAMA and FAMA, with the adaptive factor moving between the limits by a 10-bar efficiency ratio."""
    lo, hi = sorted((max(slowlimit, 1e-4), min(max(fastlimit, 1e-4), 1.0)))

    def run(xs: list[float]) -> tuple[Series, Series]:
        m_out: Series = [None] * len(xs)
        f_out: Series = [None] * len(xs)
        if len(xs) <= 10:
            return m_out, f_out
        m = f = xs[9]
        for i in range(10, len(xs)):
            move = abs(xs[i] - xs[i - 10])
            path = sum(abs(xs[j] - xs[j - 1]) for j in range(i - 9, i + 1))
            alpha = lo + (hi - lo) * (move / path if path else 0.0)
            m += alpha * (xs[i] - m)
            f += 0.5 * alpha * (m - f)
            m_out[i], f_out[i] = m, f
        return m_out, f_out

    offset, dense = _dense(values)
    m_dense, f_dense = run(dense)
    return _padded(offset, m_dense, len(values)), _padded(offset, f_dense, len(values))


def moving_average(values: Sequence[float | None], period: int, matype: int) -> Series:
    """Alpha Vantage's matype: 0 SMA, 1 EMA, 2 WMA, 3 DEMA, 4 TEMA, 5 TRIMA, 6 T3, 7 KAMA, 8 MAMA."""
    if matype == 8:
        return mama(values, 0.5, 0.05)[0]
    average: Callable[[Sequence[float | None], int], Series] = (sma, ema, wma, dema, tema, trima, t3, kama)[matype]
    return average(values, period)


# --------------------------------------------------------------------------------------------------
# Momentum and oscillators
# --------------------------------------------------------------------------------------------------


def rsi(values: Sequence[float | None], period: int) -> Series:
    """Wilder's RSI."""

    def run(xs: list[float]) -> Series:
        out: Series = [None] * len(xs)
        if len(xs) <= period:
            return out
        moves = [xs[i] - xs[i - 1] for i in range(1, len(xs))]
        gain = sum(max(m, 0.0) for m in moves[:period]) / period
        loss = sum(max(-m, 0.0) for m in moves[:period]) / period
        for i in range(period, len(xs)):
            if i > period:
                m = moves[i - 1]
                gain = (gain * (period - 1) + max(m, 0.0)) / period
                loss = (loss * (period - 1) + max(-m, 0.0)) / period
            out[i] = 100.0 if loss == 0 else 100.0 - 100.0 / (1.0 + gain / loss)
        return out

    return on_tail(values, run)


def momentum(values: Sequence[float], period: int) -> Series:
    return [None if i < period else values[i] - values[i - period] for i in range(len(values))]


def rate_of_change(values: Sequence[float], period: int, ratio: bool = False) -> Series:
    out: Series = [None] * len(values)
    for i in range(period, len(values)):
        before = values[i - period]
        if before:
            out[i] = values[i] / before if ratio else (values[i] / before - 1.0) * 100.0
    return out


def cmo(values: Sequence[float], period: int) -> Series:
    out: Series = [None] * len(values)
    moves = [0.0] + [values[i] - values[i - 1] for i in range(1, len(values))]
    up = down = 0.0
    for i in range(1, len(values)):
        up += max(moves[i], 0.0)
        down += max(-moves[i], 0.0)
        if i > period:
            up -= max(moves[i - period], 0.0)
            down -= max(-moves[i - period], 0.0)
        if i >= period and up + down > 0:
            out[i] = 100.0 * (up - down) / (up + down)
    return out


def price_oscillator(values: Sequence[float], fast: int, slow: int, matype: int, percent: bool) -> Series:
    """APO (difference of two averages) or PPO (that difference in percent of the slow one)."""
    f = moving_average(values, fast, matype)
    s = moving_average(values, slow, matype)
    out: Series = []
    for a, b in zip(f, s, strict=True):
        if a is None or b is None or (percent and not b):
            out.append(None)
        else:
            out.append((a - b) / b * 100.0 if percent else a - b)
    return out


def macd(
    values: Sequence[float], fast: int, slow: int, signal: int, matypes: tuple[int, int, int] = (1, 1, 1)
) -> tuple[Series, Series, Series]:
    """MACD line, signal line and histogram (classic MACD: EMAs; MACDEXT: any moving-average types)."""
    f = moving_average(values, fast, matypes[0])
    s = moving_average(values, slow, matypes[1])
    line: Series = [None if a is None or b is None else a - b for a, b in zip(f, s, strict=True)]
    sig = moving_average(line, signal, matypes[2])
    hist: Series = [None if a is None or b is None else a - b for a, b in zip(line, sig, strict=True)]
    return line, sig, hist


def trix(values: Sequence[float], period: int) -> Series:
    triple = ema(ema(ema(values, period), period), period)
    out: Series = [None] * len(values)
    for i in range(1, len(values)):
        a, b = triple[i], triple[i - 1]
        if a is not None and b:
            out[i] = (a / b - 1.0) * 100.0
    return out


def stochastic_k(highs: Sequence[float], lows: Sequence[float], closes: Sequence[float], period: int) -> Series:
    out: Series = [None] * len(closes)
    for i in range(period - 1, len(closes)):
        hh = max(highs[i - period + 1 : i + 1])
        ll = min(lows[i - period + 1 : i + 1])
        out[i] = 50.0 if hh == ll else (closes[i] - ll) / (hh - ll) * 100.0
    return out


def williams_r(highs: Sequence[float], lows: Sequence[float], closes: Sequence[float], period: int) -> Series:
    k = stochastic_k(highs, lows, closes, period)
    return [None if v is None else v - 100.0 for v in k]


def stochastic_rsi(values: Sequence[float], period: int, fastk: int, fastd: int, matype: int) -> tuple[Series, Series]:
    r = rsi(values, period)

    def run(xs: list[float]) -> Series:
        return stochastic_k(xs, xs, xs, fastk)

    k = on_tail(r, run)
    return k, moving_average(k, fastd, matype)


def balance_of_power(
    opens: Sequence[float], highs: Sequence[float], lows: Sequence[float], closes: Sequence[float]
) -> Series:
    return [0.0 if h == lo else (c - o) / (h - lo) for o, h, lo, c in zip(opens, highs, lows, closes, strict=True)]


def cci(highs: Sequence[float], lows: Sequence[float], closes: Sequence[float], period: int) -> Series:
    typical = [(h + lo + c) / 3 for h, lo, c in zip(highs, lows, closes, strict=True)]
    out: Series = [None] * len(typical)
    for i in range(period - 1, len(typical)):
        window = typical[i - period + 1 : i + 1]
        mean = sum(window) / period
        deviation = sum(abs(x - mean) for x in window) / period
        out[i] = 0.0 if deviation == 0 else (typical[i] - mean) / (0.015 * deviation)
    return out


def aroon(highs: Sequence[float], lows: Sequence[float], period: int) -> tuple[Series, Series]:
    """Aroon Up and Aroon Down: how recently (in % of the period) the window's high and low were made."""
    up: Series = [None] * len(highs)
    down: Series = [None] * len(highs)
    for i in range(period, len(highs)):
        window_h = highs[i - period : i + 1]
        window_l = lows[i - period : i + 1]
        since_high = period - max(range(period + 1), key=lambda j: (window_h[j], j))
        since_low = period - max(range(period + 1), key=lambda j: (-window_l[j], j))
        up[i] = 100.0 * (period - since_high) / period
        down[i] = 100.0 * (period - since_low) / period
    return up, down


def money_flow_index(
    highs: Sequence[float], lows: Sequence[float], closes: Sequence[float], volumes: Sequence[float], period: int
) -> Series:
    typical = [(h + lo + c) / 3 for h, lo, c in zip(highs, lows, closes, strict=True)]
    out: Series = [None] * len(typical)
    for i in range(period, len(typical)):
        pos = neg = 0.0
        for j in range(i - period + 1, i + 1):
            flow = typical[j] * volumes[j]
            if typical[j] > typical[j - 1]:
                pos += flow
            elif typical[j] < typical[j - 1]:
                neg += flow
        out[i] = 100.0 if neg == 0 else 100.0 - 100.0 / (1.0 + pos / neg)
    return out


def ultimate_oscillator(
    highs: Sequence[float], lows: Sequence[float], closes: Sequence[float], periods: tuple[int, int, int]
) -> Series:
    n = len(closes)
    buying = [0.0] * n
    ranges = [0.0] * n
    for i in range(1, n):
        low = min(lows[i], closes[i - 1])
        buying[i] = closes[i] - low
        ranges[i] = max(highs[i], closes[i - 1]) - low
    longest = max(periods)
    out: Series = [None] * n
    for i in range(longest, n):
        averages = []
        for p in periods:
            r = sum(ranges[i - p + 1 : i + 1])
            averages.append(sum(buying[i - p + 1 : i + 1]) / r if r else 0.0)
        out[i] = 100.0 * (4 * averages[0] + 2 * averages[1] + averages[2]) / 7
    return out


# --------------------------------------------------------------------------------------------------
# Volatility, trend and directional movement
# --------------------------------------------------------------------------------------------------


def true_range(highs: Sequence[float], lows: Sequence[float], closes: Sequence[float]) -> Series:
    out: Series = [None]
    for i in range(1, len(closes)):
        out.append(max(highs[i], closes[i - 1]) - min(lows[i], closes[i - 1]))
    return out[: len(closes)]


def _wilder_average(values: Series, period: int) -> Series:
    """Wilder's smoothing of values that start at index 1: the first is the mean of `period` values."""

    def run(xs: list[float]) -> Series:
        out: Series = [None] * len(xs)
        if len(xs) < period:
            return out
        level = sum(xs[:period]) / period
        out[period - 1] = level
        for i in range(period, len(xs)):
            level = (level * (period - 1) + xs[i]) / period
            out[i] = level
        return out

    return on_tail(values, run)


def atr(highs: Sequence[float], lows: Sequence[float], closes: Sequence[float], period: int) -> Series:
    return _wilder_average(true_range(highs, lows, closes), period)


def natr(highs: Sequence[float], lows: Sequence[float], closes: Sequence[float], period: int) -> Series:
    a = atr(highs, lows, closes, period)
    return [None if v is None or not c else v / c * 100.0 for v, c in zip(a, closes, strict=True)]


def directional(
    highs: Sequence[float], lows: Sequence[float], closes: Sequence[float], period: int
) -> dict[str, Series]:
    """The directional-movement family: PLUS_DM, MINUS_DM, PLUS_DI, MINUS_DI, DX, ADX and ADXR."""
    n = len(closes)
    plus_dm: Series = [None] * n
    minus_dm: Series = [None] * n
    for i in range(1, n):
        up, down = highs[i] - highs[i - 1], lows[i - 1] - lows[i]
        plus_dm[i] = up if up > down and up > 0 else 0.0
        minus_dm[i] = down if down > up and down > 0 else 0.0
    # Wilder sums (not averages) for DM and TR; the ratio is the same either way
    plus_s = [None if v is None else v * period for v in _wilder_average(plus_dm, period)]
    minus_s = [None if v is None else v * period for v in _wilder_average(minus_dm, period)]
    tr_s = [None if v is None else v * period for v in _wilder_average(true_range(highs, lows, closes), period)]
    plus_di: Series = [None] * n
    minus_di: Series = [None] * n
    dx: Series = [None] * n
    for i in range(n):
        p, m, t = plus_s[i], minus_s[i], tr_s[i]
        if p is None or m is None or not t:
            continue
        plus_di[i], minus_di[i] = 100.0 * p / t, 100.0 * m / t
        dx[i] = 100.0 * abs(p - m) / (p + m) if p + m else 0.0
    adx = _wilder_average(dx, period)
    adxr: Series = [None] * n
    for i in range(n):
        a = adx[i]
        b = adx[i - period + 1] if i - period + 1 >= 0 else None
        if a is not None and b is not None:
            adxr[i] = (a + b) / 2
    return {
        "PLUS_DM": plus_s,
        "MINUS_DM": minus_s,
        "PLUS_DI": plus_di,
        "MINUS_DI": minus_di,
        "DX": dx,
        "ADX": adx,
        "ADXR": adxr,
    }


def stddev(values: Sequence[float | None], period: int) -> Series:
    """Population standard deviation over a sliding window (running sums, so it stays fast)."""

    def run(xs: list[float]) -> Series:
        out: Series = [None] * len(xs)
        total = squares = 0.0
        for i, x in enumerate(xs):
            total += x
            squares += x * x
            if i >= period:
                total -= xs[i - period]
                squares -= xs[i - period] ** 2
            if i >= period - 1:
                out[i] = math.sqrt(max(squares / period - (total / period) ** 2, 0.0))
        return out

    return on_tail(values, run)


def bollinger(
    values: Sequence[float], period: int, up: float, down: float, matype: int
) -> tuple[Series, Series, Series]:
    middle = moving_average(values, period, matype)
    deviation = stddev(values, period)
    upper: Series = []
    lower: Series = []
    for m, d in zip(middle, deviation, strict=True):
        upper.append(None if m is None or d is None else m + up * d)
        lower.append(None if m is None or d is None else m - down * d)
    return upper, middle, lower


def midpoint(values: Sequence[float], period: int) -> Series:
    return [
        None if i < period - 1 else (max(values[i - period + 1 : i + 1]) + min(values[i - period + 1 : i + 1])) / 2
        for i in range(len(values))
    ]


def midprice(highs: Sequence[float], lows: Sequence[float], period: int) -> Series:
    return [
        None if i < period - 1 else (max(highs[i - period + 1 : i + 1]) + min(lows[i - period + 1 : i + 1])) / 2
        for i in range(len(highs))
    ]


def parabolic_sar(highs: Sequence[float], lows: Sequence[float], step: float, maximum: float) -> Series:
    n = len(highs)
    out: Series = [None] * n
    if n < 2:
        return out
    rising = highs[1] + lows[1] >= highs[0] + lows[0]
    sar = lows[0] if rising else highs[0]
    extreme = highs[1] if rising else lows[1]
    factor = step
    for i in range(1, n):
        sar += factor * (extreme - sar)
        if rising:
            sar = min(sar, lows[i - 1], lows[i - 2] if i >= 2 else lows[i - 1])
            if lows[i] < sar:  # reversal
                rising, sar, extreme, factor = False, extreme, lows[i], step
            elif highs[i] > extreme:
                extreme, factor = highs[i], min(factor + step, maximum)
        else:
            sar = max(sar, highs[i - 1], highs[i - 2] if i >= 2 else highs[i - 1])
            if highs[i] > sar:
                rising, sar, extreme, factor = True, extreme, highs[i], step
            elif lows[i] < extreme:
                extreme, factor = lows[i], min(factor + step, maximum)
        out[i] = sar
    return out


# --------------------------------------------------------------------------------------------------
# Volume
# --------------------------------------------------------------------------------------------------


def chaikin_ad(
    highs: Sequence[float], lows: Sequence[float], closes: Sequence[float], volumes: Sequence[float]
) -> Series:
    out: Series = []
    total = 0.0
    for h, lo, c, v in zip(highs, lows, closes, volumes, strict=True):
        if h != lo:
            total += ((c - lo) - (h - c)) / (h - lo) * v
        out.append(total)
    return out


def chaikin_oscillator(
    highs: Sequence[float],
    lows: Sequence[float],
    closes: Sequence[float],
    volumes: Sequence[float],
    fast: int,
    slow: int,
) -> Series:
    ad = chaikin_ad(highs, lows, closes, volumes)
    f, s = ema(ad, fast), ema(ad, slow)
    return [None if a is None or b is None else a - b for a, b in zip(f, s, strict=True)]


def on_balance_volume(closes: Sequence[float], volumes: Sequence[float]) -> Series:
    out: Series = []
    total = 0.0
    for i, (c, v) in enumerate(zip(closes, volumes, strict=True)):
        if i and c > closes[i - 1]:
            total += v
        elif i and c < closes[i - 1]:
            total -= v
        out.append(total)
    return out


def vwap(
    days: Sequence[str],
    highs: Sequence[float],
    lows: Sequence[float],
    closes: Sequence[float],
    volumes: Sequence[float],
) -> Series:
    """Volume-weighted average price, restarting every day (`days` holds each bar's date)."""
    out: Series = []
    day, pv, vol = "", 0.0, 0.0
    for d, h, lo, c, v in zip(days, highs, lows, closes, volumes, strict=True):
        if d != day:
            day, pv, vol = d, 0.0, 0.0
        pv += (h + lo + c) / 3 * v
        vol += v
        out.append(pv / vol if vol else c)
    return out


# --------------------------------------------------------------------------------------------------
# Hilbert transform family (simplified Ehlers)
# --------------------------------------------------------------------------------------------------

HT_LOOKBACK = 63  # like TA-Lib, the first 63 bars give no value


def hilbert(values: Sequence[float]) -> dict[str, Series]:
    """Ehlers-style cycle measures: DCPERIOD, DCPHASE, SINE, LEAD SINE, TRENDMODE, TRENDLINE, PHASE, QUADRATURE."""
    n = len(values)
    smooth = [0.0] * n
    detrender = [0.0] * n
    q1 = [0.0] * n
    i1 = [0.0] * n
    i2 = q2 = re = im = 0.0
    period = smooth_period = 15.0
    out: dict[str, Series] = {
        k: [None] * n
        for k in ("DCPERIOD", "DCPHASE", "SINE", "LEAD SINE", "TRENDMODE", "HT_TRENDLINE", "PHASE", "QUADRATURE")
    }
    prefix = [0.0]
    for v in values:
        prefix.append(prefix[-1] + v)
    raw_trend = [0.0] * n
    last_cross = 0
    prev_sine = prev_lead = 0.0

    def transform(xs: list[float], i: int, adjust: float) -> float:
        return (0.0962 * xs[i] + 0.5769 * xs[i - 2] - 0.5769 * xs[i - 4] - 0.0962 * xs[i - 6]) * adjust

    for i in range(n):
        if i >= 3:
            smooth[i] = (4 * values[i] + 3 * values[i - 1] + 2 * values[i - 2] + values[i - 3]) / 10
        else:
            smooth[i] = values[i]
        if i < 9:
            continue
        adjust = 0.075 * period + 0.54
        detrender[i] = transform(smooth, i, adjust)
        q1[i] = transform(detrender, i, adjust)
        i1[i] = detrender[i - 3]
        j_i = transform(i1, i, adjust)
        j_q = transform(q1, i, adjust)
        i2_new, q2_new = i1[i] - j_q, q1[i] + j_i
        i2_new, q2_new = 0.2 * i2_new + 0.8 * i2, 0.2 * q2_new + 0.8 * q2
        re = 0.2 * (i2_new * i2 + q2_new * q2) + 0.8 * re
        im = 0.2 * (i2_new * q2 - q2_new * i2) + 0.8 * im
        i2, q2 = i2_new, q2_new
        new_period = period
        if im and re:
            angle = math.degrees(math.atan(im / re))
            if angle > 0:
                new_period = 360.0 / angle
        new_period = min(max(new_period, 0.67 * period, 6.0), 1.5 * period, 50.0)
        period = 0.2 * new_period + 0.8 * period
        smooth_period = 0.33 * period + 0.67 * smooth_period
        window = max(1, min(int(smooth_period + 0.5), i + 1))
        raw_trend[i] = (prefix[i + 1] - prefix[i + 1 - window]) / window
        trendline = (4 * raw_trend[i] + 3 * raw_trend[i - 1] + 2 * raw_trend[i - 2] + raw_trend[i - 3]) / 10
        phase = math.degrees(math.atan2(q1[i], i1[i])) + 90.0  # (-90, 270]
        if phase < -45.0:
            phase += 360.0  # TA-Lib's range: (-45, 315]
        sine, lead = math.sin(math.radians(phase)), math.sin(math.radians(phase + 45.0))
        if (sine > lead) != (prev_sine > prev_lead):
            last_cross = i
        prev_sine, prev_lead = sine, lead
        trending = i - last_cross > 0.5 * smooth_period or (
            trendline != 0 and abs(smooth[i] - trendline) / abs(trendline) >= 0.015
        )
        if i < HT_LOOKBACK:
            continue
        out["DCPERIOD"][i] = smooth_period
        out["DCPHASE"][i] = phase
        out["SINE"][i] = sine
        out["LEAD SINE"][i] = lead
        out["TRENDMODE"][i] = 1.0 if trending else 0.0
        out["HT_TRENDLINE"][i] = trendline
        out["PHASE"][i] = i1[i]
        out["QUADRATURE"][i] = q1[i]
    return out


# --------------------------------------------------------------------------------------------------
# Return statistics (ANALYTICS_FIXED_WINDOW / ANALYTICS_SLIDING_WINDOW)
# --------------------------------------------------------------------------------------------------


def returns(prices: Sequence[float]) -> list[float]:
    return [prices[i] / prices[i - 1] - 1.0 for i in range(1, len(prices)) if prices[i - 1]]


def covariance(a: Sequence[float], b: Sequence[float]) -> float:
    n = min(len(a), len(b))
    if n < 2:
        return 0.0
    a, b = a[-n:], b[-n:]
    ma, mb = sum(a) / n, sum(b) / n
    return sum((x - ma) * (y - mb) for x, y in zip(a, b, strict=True)) / (n - 1)


def correlation(a: Sequence[float], b: Sequence[float]) -> float:
    va, vb = covariance(a, a), covariance(b, b)
    return covariance(a, b) / math.sqrt(va * vb) if va > 0 and vb > 0 else 0.0


def autocorrelation(xs: Sequence[float], lag: int) -> float:
    if len(xs) <= lag + 1:
        return 0.0
    return correlation(xs[:-lag], xs[lag:])


def max_drawdown(prices: Sequence[float]) -> tuple[float, int, int]:
    """The deepest peak-to-trough fall (a negative fraction), with the peak's and the trough's indexes."""
    worst, peak_at, start, end = 0.0, 0, 0, 0
    for i, p in enumerate(prices):
        if p > prices[peak_at]:
            peak_at = i
        fall = p / prices[peak_at] - 1.0 if prices[peak_at] else 0.0
        if fall < worst:
            worst, start, end = fall, peak_at, i
    return worst, start, end


def histogram(xs: Sequence[float], bins: int) -> tuple[list[int], list[float]]:
    lo, hi = (min(xs), max(xs)) if xs else (0.0, 0.0)
    width = (hi - lo) / bins if hi > lo else 1.0
    counts = [0] * bins
    for x in xs:
        counts[min(int((x - lo) / width), bins - 1)] += 1
    return counts, [lo + width * k for k in range(bins + 1)]


def rolling(xs: Sequence[float], window: int, name: str, scale: float = 1.0) -> list[float]:
    """A statistic of every `window`-long run of `xs` (value k covers xs[k:k + window]), in one pass.

    `name` is MEAN, MEDIAN, CUMULATIVE_RETURN, VARIANCE or STDDEV (sample variance, times `scale` to annualise).
    """
    out: list[float] = []
    if name == "MEDIAN":
        ordered = sorted(xs[:window])
        for k in range(len(xs) - window + 1):
            if k:
                del ordered[bisect.bisect_left(ordered, xs[k - 1])]
                bisect.insort(ordered, xs[k + window - 1])
            mid = window // 2
            out.append(ordered[mid] if window % 2 else (ordered[mid - 1] + ordered[mid]) / 2)
        return out
    total = squares = logs = 0.0
    for i, x in enumerate(xs):
        total += x
        squares += x * x
        logs += math.log1p(max(x, -0.999999))
        if i >= window:
            old = xs[i - window]
            total -= old
            squares -= old * old
            logs -= math.log1p(max(old, -0.999999))
        if i < window - 1:
            continue
        if name == "MEAN":
            out.append(total / window)
        elif name == "CUMULATIVE_RETURN":
            out.append(math.expm1(logs))
        else:
            variance = max(squares - total * total / window, 0.0) / (window - 1) * scale
            out.append(variance if name == "VARIANCE" else math.sqrt(variance))
    return out


def rolling_pair(xs: Sequence[float], ys: Sequence[float], window: int, name: str) -> list[float]:
    """COVARIANCE or CORRELATION of every `window`-long run of two equally long series, in one pass."""
    out: list[float] = []
    sx = sy = sxx = syy = sxy = 0.0
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        sx, sy, sxx, syy, sxy = sx + x, sy + y, sxx + x * x, syy + y * y, sxy + x * y
        if i >= window:
            a, b = xs[i - window], ys[i - window]
            sx, sy, sxx, syy, sxy = sx - a, sy - b, sxx - a * a, syy - b * b, sxy - a * b
        if i < window - 1:
            continue
        cov = (sxy - sx * sy / window) / (window - 1)
        if name == "COVARIANCE":
            out.append(cov)
            continue
        vx = max(sxx - sx * sx / window, 0.0) / (window - 1)
        vy = max(syy - sy * sy / window, 0.0) / (window - 1)
        out.append(cov / math.sqrt(vx * vy) if vx > 0 and vy > 0 else 0.0)
    return out
