/**
 * Prime fields and polynomials of draft-irtf-cfrg-vdaf-20 (sections "Finite Fields" and
 * "Polynomial Representation"), a port of the Python SDK's `client_sdk.vdaf.field`.
 *
 * A field vector is a `bigint[]` of canonical residues in `[0, modulus)`. The FLP's polynomials
 * live in the Lagrange basis over the `n`-th roots of unity (the draft, after [Faz25]).
 */

/** The smallest power of two that is at least `n` (`n >= 1`). */
export function nextPowerOf2(n: number): number {
  if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`nextPowerOf2 needs n >= 1, got ${typeof n}`);
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

function checkPowerOf2(n: number): void {
  if (!Number.isSafeInteger(n) || n < 1 || (n & (n - 1)) !== 0) {
    throw new RangeError(`length must be a power of two, got ${n}`);
  }
}

/** `base ** exp mod mod` by square and multiply. */
export function powMod(base: bigint, exp: bigint, mod: bigint): bigint {
  let result = 1n;
  let b = base % mod;
  let e = exp;
  while (e > 0n) {
    if (e & 1n) result = (result * b) % mod;
    b = (b * b) % mod;
    e >>= 1n;
  }
  return result;
}

/** An NTT-friendly prime field with the draft's parameters (its table "fields"). */
export class Field {
  readonly #rootPowers = new Map<number, bigint[]>();
  readonly #roots = new Map<number, bigint>();
  readonly #inverses = new Map<number, bigint>();
  readonly #shifts = new Map<number, bigint[]>();
  readonly #gen: bigint;

  constructor(
    readonly name: string,
    readonly modulus: bigint,
    readonly encodedSize: number,
    readonly genOrder: bigint,
    genExp: bigint,
  ) {
    this.#gen = powMod(7n, genExp, modulus); // the generator is 7 ** genExp
  }

  inv(x: bigint): bigint {
    if (x % this.modulus === 0n) throw new RangeError("inverse of zero");
    return powMod(x, this.modulus - 2n, this.modulus);
  }

  /** The principal `n`-th root of unity, `gen ** (genOrder / n)` (cached per `n`). */
  nthRoot(n: number): bigint {
    let w = this.#roots.get(n);
    if (w === undefined) {
      checkPowerOf2(n);
      if (BigInt(n) > this.genOrder) throw new RangeError(`no ${n}-th root of unity in ${this.name}`);
      w = powMod(this.#gen, this.genOrder / BigInt(n), this.modulus);
      this.#roots.set(n, w);
    }
    return w;
  }

  /** `1 / n` for a transform size `n` (cached per `n`). */
  #invSize(n: number): bigint {
    let inv = this.#inverses.get(n);
    if (inv === undefined) {
      inv = this.inv(BigInt(n));
      this.#inverses.set(n, inv);
    }
    return inv;
  }

  /** `W_n ** i` for `i < n` (cached per `n`). */
  nthRootPowers(n: number): readonly bigint[] {
    let out = this.#rootPowers.get(n);
    if (out === undefined) {
      const w = this.nthRoot(n);
      out = new Array<bigint>(n);
      out[0] = 1n;
      for (let i = 1; i < n; i++) out[i] = ((out[i - 1] as bigint) * w) % this.modulus;
      this.#rootPowers.set(n, out);
    }
    return out;
  }

  // -- encoding -----------------------------------------------------------------------------

  /** Little-endian elements, `encodedSize` bytes each. */
  encodeVec(vec: readonly bigint[]): Uint8Array {
    const size = this.encodedSize;
    const out = new Uint8Array(vec.length * size);
    const view = new DataView(out.buffer);
    for (let i = 0; i < vec.length; i++) {
      const x = vec[i] as bigint;
      view.setBigUint64(i * size, x & 0xffffffffffffffffn, true);
      if (size === 16) view.setBigUint64(i * size + 8, x >> 64n, true);
    }
    return out;
  }

  /** The little-endian integer of `size` bytes at `offset` of `view` (a candidate element). */
  readElement(view: DataView, offset: number): bigint {
    const low = view.getBigUint64(offset, true);
    return this.encodedSize === 16 ? low | (view.getBigUint64(offset + 8, true) << 64n) : low;
  }

  // -- vectors and polynomials ----------------------------------------------------------------

  vecAdd(left: readonly bigint[], right: readonly bigint[]): bigint[] {
    if (left.length !== right.length) throw new RangeError(`mismatched vector sizes: ${left.length} and ${right.length}`);
    const p = this.modulus;
    return left.map((a, i) => {
      const s = a + (right[i] as bigint);
      return s >= p ? s - p : s;
    });
  }

  vecSub(left: readonly bigint[], right: readonly bigint[]): bigint[] {
    if (left.length !== right.length) throw new RangeError(`mismatched vector sizes: ${left.length} and ${right.length}`);
    const p = this.modulus;
    return left.map((a, i) => {
      const d = a - (right[i] as bigint);
      return d < 0n ? d + p : d;
    });
  }

  /** Horner evaluation of a polynomial in the monomial basis (constant first). */
  polyEval(coeffs: readonly bigint[], x: bigint): bigint {
    const p = this.modulus;
    let acc = 0n;
    for (let i = coeffs.length - 1; i >= 0; i--) acc = (acc * x + (coeffs[i] as bigint)) % p;
    return acc;
  }

  /** `v[i] = poly(W_n ** i)`, or `poly(s * W_n ** i)` with `s = W_2n` if `setS`. */
  ntt(coeffs: readonly bigint[], n: number, setS = false): bigint[] {
    const p = this.modulus;
    if (coeffs.length > n) throw new RangeError(`${coeffs.length} coefficients do not fit an NTT of size ${n}`);
    const a = coeffs.slice();
    while (a.length < n) a.push(0n);
    if (setS) {
      const sk = this.nthRootPowers(2 * n); // s ** k = W_2n ** k
      for (let k = 0; k < n; k++) a[k] = ((a[k] as bigint) * (sk[k] as bigint)) % p;
    }
    return nttInPlace(p, a, this.nthRootPowers(n), 1);
  }

  /** The coefficients of the polynomial of degree < n with `values[i] = poly(W_n ** i)`. */
  invNtt(values: readonly bigint[], n: number): bigint[] {
    const p = this.modulus;
    if (values.length !== n) throw new RangeError(`inverse NTT of size ${n} needs ${n} values, got ${values.length}`);
    const out = nttInPlace(p, values.slice(), this.nthRootPowers(n), -1);
    const nInv = this.#invSize(n);
    return out.map((x) => (x * nInv) % p);
  }

  /**
   * The values at the odd `2n`-th roots `W_2n ** (2i + 1)` of the polynomial of degree < n
   * with `values[i] = poly(W_n ** i)`: `ntt(invNtt(values, n), n, true)` with the inverse's
   * `1/n` and the shift's `W_2n ** k` folded into one table.
   */
  oddEvaluations(values: readonly bigint[]): bigint[] {
    const n = values.length;
    const p = this.modulus;
    let shift = this.#shifts.get(n);
    if (shift === undefined) {
      const nInv = this.#invSize(n);
      shift = this.nthRootPowers(2 * n)
        .slice(0, n)
        .map((sk) => (sk * nInv) % p);
      this.#shifts.set(n, shift);
    }
    const roots = this.nthRootPowers(n);
    const a = nttInPlace(p, values.slice(), roots, -1);
    for (let k = 0; k < n; k++) a[k] = ((a[k] as bigint) * (shift[k] as bigint)) % p;
    return nttInPlace(p, a, roots, 1);
  }
}

/**
 * Radix-2 decimation in time: bit-reverse, then butterflies with the root table `W ** i`
 * (`direction` -1 uses `W ** -i`, the inverse transform before its `1/n`).
 */
function nttInPlace(p: bigint, a: bigint[], roots: readonly bigint[], direction: 1 | -1): bigint[] {
  const n = a.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    while (j & bit) {
      j ^= bit;
      bit >>= 1;
    }
    j |= bit;
    if (i < j) {
      const t = a[i] as bigint;
      a[i] = a[j] as bigint;
      a[j] = t;
    }
  }
  for (let length = 2; length <= n; length <<= 1) {
    const half = length >> 1;
    const stride = n / length;
    for (let start = 0; start < n; start += length) {
      for (let k = 0; k < half; k++) {
        const index = k * stride;
        const tw = (direction === 1 ? roots[index] : roots[(n - index) % n]) as bigint;
        const u = a[start + k] as bigint;
        const v = ((a[start + k + half] as bigint) * tw) % p;
        const sum = u + v;
        a[start + k] = sum >= p ? sum - p : sum;
        const diff = u - v;
        a[start + k + half] = diff < 0n ? diff + p : diff;
      }
    }
  }
  return a;
}

/** `p = 2**64 - 2**32 + 1`, elements encoded in 8 bytes. */
export const Field64 = new Field("Field64", 2n ** 32n * 4294967295n + 1n, 8, 2n ** 32n, 4294967295n);

/** `p = 2**66 * 4611686018427387897 + 1`, elements encoded in 16 bytes. */
export const Field128 = new Field("Field128", 2n ** 66n * 4611686018427387897n + 1n, 16, 2n ** 66n, 4611686018427387897n);

/**
 * `p * q` for two polynomials given by their `n` values at the `n`-th roots of unity: the `2n`
 * values of the product at the `2n`-th roots (the draft's `Lagrange.poly_mul`).
 */
export function polyMul(field: Field, p: readonly bigint[], q: readonly bigint[]): bigint[] {
  if (p.length !== q.length) throw new RangeError(`polyMul of lengths ${p.length} and ${q.length}`);
  const a = doubleEvaluations(field, p);
  const b = doubleEvaluations(field, q);
  const mod = field.modulus;
  return a.map((x, i) => (x * (b[i] as bigint)) % mod);
}

/** From `n` values at the `n`-th roots to `2n` values at the `2n`-th roots. */
export function doubleEvaluations(field: Field, p: readonly bigint[]): bigint[] {
  const n = p.length;
  checkPowerOf2(n);
  const odd = field.oddEvaluations(p);
  const out = new Array<bigint>(2 * n);
  for (let i = 0; i < n; i++) {
    out[2 * i] = p[i] as bigint;
    out[2 * i + 1] = odd[i] as bigint;
  }
  return out;
}

/**
 * `L_i(x)` for the `n` Lagrange basis polynomials over the `n`-th roots:
 * `L_i(x) = W**i / n * prod_{j != i} (x - W**j)` (the derivative of `x**n - 1` at `W**i` is
 * `n * W**-i`); prefix and suffix products avoid any inversion but `1/n`.
 */
export function lagrangeBasisAt(field: Field, n: number, x: bigint): bigint[] {
  const mod = field.modulus;
  const nodes = field.nthRootPowers(n);
  const diffs = nodes.map((w) => (x - w + mod) % mod);
  const prefix = new Array<bigint>(n + 1).fill(1n);
  for (let i = 0; i < n; i++) prefix[i + 1] = ((prefix[i] as bigint) * (diffs[i] as bigint)) % mod;
  const nInv = field.inv(BigInt(n));
  const out = new Array<bigint>(n);
  let suffix = 1n;
  for (let i = n - 1; i >= 0; i--) {
    out[i] = (((((prefix[i] as bigint) * suffix) % mod) * (nodes[i] as bigint)) % mod * nInv) % mod;
    suffix = (suffix * (diffs[i] as bigint)) % mod;
  }
  return out;
}

/** Each polynomial (values at the `n`-th roots, all of one length `n`) evaluated at `x`. */
export function lagrangeEvalBatched(field: Field, polys: readonly (readonly bigint[])[], x: bigint): bigint[] {
  const basis = lagrangeBasisAt(field, (polys[0] as bigint[]).length, x);
  const mod = field.modulus;
  return polys.map((poly) => poly.reduce((acc, a, i) => acc + a * (basis[i] as bigint), 0n) % mod);
}

/**
 * The `n` values at the `n`-th roots of the polynomial of degree `< p.length` whose values at
 * the first `p.length` roots are `p`: the top `n - p.length` monomial coefficients vanish, and
 * coefficient `d` is `1/n * sum_i v_i W**(-i d)`, a small linear system in the missing values.
 */
export function extendValuesToPowerOf2(field: Field, p: readonly bigint[], n: number): bigint[] {
  checkPowerOf2(n);
  const m = p.length;
  if (m > n) throw new RangeError(`${m} values do not fit ${n} points`);
  if (m === n) return p.slice();
  const mod = field.modulus;
  const nodes = field.nthRootPowers(n);
  const node = (e: number): bigint => nodes[((e % n) + n) % n] as bigint;
  // Row d: sum_{i missing} v_i W^(-i d) = -sum_{i < m} p_i W^(-i d).
  const rows: bigint[][] = [];
  for (let d = m; d < n; d++) {
    const row: bigint[] = [];
    for (let i = m; i < n; i++) row.push(node(-i * d));
    let rhs = 0n;
    for (let i = 0; i < m; i++) rhs += (p[i] as bigint) * node(-i * d);
    row.push((mod - (rhs % mod)) % mod);
    rows.push(row);
  }
  return [...p, ...solve(field, rows)];
}

/** Gauss-Jordan elimination over the field of a square system given as augmented rows. */
function solve(field: Field, rows: bigint[][]): bigint[] {
  const k = rows.length;
  const mod = field.modulus;
  for (let col = 0; col < k; col++) {
    let pivot = col;
    while ((rows[pivot] as bigint[])[col] === 0n) pivot++;
    [rows[col], rows[pivot]] = [rows[pivot] as bigint[], rows[col] as bigint[]];
    const inv = field.inv((rows[col] as bigint[])[col] as bigint);
    rows[col] = (rows[col] as bigint[]).map((v) => (v * inv) % mod);
    for (let r = 0; r < k; r++) {
      const f = (rows[r] as bigint[])[col] as bigint;
      if (r !== col && f !== 0n) {
        const pivotRow = rows[col] as bigint[];
        rows[r] = (rows[r] as bigint[]).map((a, j) => (((a - f * (pivotRow[j] as bigint)) % mod) + mod) % mod);
      }
    }
  }
  return rows.map((row) => row[k] as bigint);
}
