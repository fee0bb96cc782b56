/**
 * Float64 helpers the numeric mechanisms' parameters need beyond src/rational.ts: Python's
 * `round` of a double (half to even) and `exp_below` (client_sdk/mechanisms/grid.py), the double
 * just below the correctly rounded e^x, so that a ratio at most `expBelow(eps)` in exact
 * arithmetic is at most e^eps.
 */
import { expDouble } from "./rational.js";

/** Python's `round(x)` of a double: the nearest integer, halves to even. */
export function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const diff = x - floor;
  if (diff > 0.5) return floor + 1;
  if (diff < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

const FLOAT_VIEW = new DataView(new ArrayBuffer(8));

/** The largest double below a positive finite `x` (Python's `math.nextafter(x, 0)`). */
export function nextDown(x: number): number {
  if (!(x > 0) || !Number.isFinite(x)) throw new RangeError(`nextDown needs a positive finite number, got ${x}`);
  FLOAT_VIEW.setFloat64(0, x);
  FLOAT_VIEW.setBigUint64(0, FLOAT_VIEW.getBigUint64(0) - 1n);
  return FLOAT_VIEW.getFloat64(0);
}

/** grid.py `exp_below`: the double below `math.exp(x)` (correctly rounded here). */
export function expBelow(x: number): number {
  return nextDown(expDouble(x));
}
