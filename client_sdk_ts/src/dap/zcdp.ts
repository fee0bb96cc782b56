/**
 * Zero-concentrated DP converted to (epsilon, delta)-DP, as the device checks a `"gaussian:RHO"`
 * secure-aggregation task (docs/math/dap-noise.md, "The device's ceiling"; Python:
 * `client_sdk.zcdp`). A rho-zCDP mechanism has Renyi divergence at most `alpha * rho` at every
 * order alpha > 1 (Bun & Steinke, TCC 2016, Def. 1.1); its epsilon at delta is the Renyi
 * conversion of Canonne, Kamath, Steinke (NeurIPS 2020, Corollary 13; Balle et al., AISTATS
 * 2020), minimised over Python's grid of orders (every order gives a valid bound; the grid only
 * decides how tight it is, so the same grid gives the same figure).
 */

/** Python's `DEFAULT_ORDERS`: 1.01 ... 1.99, then 400 orders from 2 to 1e5 spaced geometrically. */
const ORDERS: readonly number[] = (() => {
  const dense = Array.from({ length: 99 }, (_, i) => 1 + (i + 1) / 100);
  const [low, high] = [Math.log10(2), Math.log10(1e5)];
  const geometric = Array.from({ length: 400 }, (_, i) => (i === 0 ? 2 : i === 399 ? 1e5 : 10 ** (low + ((high - low) * i) / 399)));
  return [...new Set([...dense, ...geometric])].sort((a, b) => a - b);
})();

/**
 * The epsilon of rho-zCDP at `delta`: min over the orders alpha of alpha rho + ln(1 - 1/alpha)
 * - (ln delta + ln alpha)/(alpha - 1), and 0 where delta >= sqrt(1 - e^(-alpha rho))
 * (Bretagnolle-Huber), as Python's `rdp_to_epsilon` (and dp_accounting) computes it.
 */
export function zcdpEpsilon(rho: number, delta: number): number {
  if (!(rho > 0) || !Number.isFinite(rho)) throw new RangeError(`rho must be a positive finite number; got ${typeof rho}`);
  if (!(delta >= 0 && delta < 1)) throw new RangeError(`delta must be a number in [0, 1); got ${typeof delta}`);
  if (delta === 0) return Infinity;
  let best = Infinity;
  for (const alpha of ORDERS) {
    const r = alpha * rho;
    const epsilon = delta ** 2 + Math.expm1(-r) > 0 ? 0 : r + Math.log1p(-1 / alpha) - (Math.log(delta) + Math.log(alpha)) / (alpha - 1);
    if (!Number.isNaN(epsilon) && epsilon < best) best = epsilon;
  }
  return Math.max(0, best);
}
