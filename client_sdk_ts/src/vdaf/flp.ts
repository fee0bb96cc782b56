/**
 * The fully linear proof of draft-irtf-cfrg-vdaf-20 (section "FLP
 * Specification", after [BBCGGI19] section 4.2), its gadgets (appendix "FLP Gadgets") and the
 * validity circuits of the five registered Prio3 variants: a port of the Python SDK's
 * `client_sdk.vdaf.flp` (prove; query and decide to check a Client's proofs in tests).
 *
 * A wire polynomial holds its values at the `p`-th roots of unity (value 0 is the wire seed,
 * value `k` the `k`-th call's input); the proof carries the first `DEGREE * (p - 1) + 1` values
 * of each gadget polynomial.
 */
import { type Field, extendValuesToPowerOf2, lagrangeEvalBatched, nextPowerOf2, polyMul, powMod } from "./field.js";

/** A measurement the circuit cannot encode: names the field and the value's type only. */
export class MeasurementError extends TypeError {
  override name = "MeasurementError";
}

/** Values in each wire polynomial: the seed plus one per call, rounded up to a power of 2. */
export function wirePolyLen(gadgetCalls: number): number {
  return nextPowerOf2(1 + gadgetCalls);
}

/** Values that determine a gadget polynomial of degree `degree * (wireLen - 1)`. */
export function gadgetPolyLen(degree: number, wireLen: number): number {
  return degree * (wireLen - 1) + 1;
}

/** What a circuit calls: a gadget, or the prover's recording shim. */
export interface GadgetCall {
  eval(field: Field, inp: readonly bigint[]): bigint;
}

export interface Gadget extends GadgetCall {
  readonly arity: number;
  readonly degree: number;
  evalPoly(field: Field, inpPoly: readonly (readonly bigint[])[]): bigint[];
}

/** `Mul(x, y) = x * y`. */
export class Mul implements Gadget {
  readonly arity = 2;
  readonly degree = 2;

  eval(field: Field, inp: readonly bigint[]): bigint {
    return ((inp[0] as bigint) * (inp[1] as bigint)) % field.modulus;
  }

  evalPoly(field: Field, inpPoly: readonly (readonly bigint[])[]): bigint[] {
    return polyMul(field, inpPoly[0] as bigint[], inpPoly[1] as bigint[]);
  }
}

/** `PolyEval(x) = q(x)` for a fixed polynomial `q` (coefficients, constant first). */
export class PolyEval implements Gadget {
  readonly arity = 1;
  readonly degree: number;
  readonly #coeffs: bigint[];
  readonly #n: number;

  constructor(coeffs: readonly bigint[], numCalls: number) {
    const c = coeffs.slice();
    while (c.length > 0 && c[c.length - 1] === 0n) c.pop();
    if (c.length === 0) throw new RangeError("PolyEval: invalid polynomial: zero length");
    this.#coeffs = c;
    this.degree = c.length - 1;
    this.#n = nextPowerOf2(gadgetPolyLen(this.degree, wirePolyLen(numCalls)));
  }

  #reduced(field: Field): bigint[] {
    const p = field.modulus;
    return this.#coeffs.map((c) => ((c % p) + p) % p);
  }

  eval(field: Field, inp: readonly bigint[]): bigint {
    return field.polyEval(this.#reduced(field), inp[0] as bigint);
  }

  evalPoly(field: Field, inpPoly: readonly (readonly bigint[])[]): bigint[] {
    const wire = inpPoly[0] as bigint[];
    const values = field.ntt(field.invNtt(wire, wire.length), this.#n);
    const q = this.#reduced(field);
    return values.map((x) => field.polyEval(q, x));
  }
}

/** `count` copies of a subcircuit on consecutive inputs, summed. */
export class ParallelSum implements Gadget {
  readonly arity: number;
  readonly degree: number;

  constructor(
    readonly subcircuit: Gadget,
    readonly count: number,
  ) {
    this.arity = subcircuit.arity * count;
    this.degree = subcircuit.degree;
  }

  eval(field: Field, inp: readonly bigint[]): bigint {
    const a = this.subcircuit.arity;
    let total = 0n;
    for (let i = 0; i < this.count; i++) total += this.subcircuit.eval(field, inp.slice(i * a, (i + 1) * a));
    return total % field.modulus;
  }

  evalPoly(field: Field, inpPoly: readonly (readonly bigint[])[]): bigint[] {
    const a = this.subcircuit.arity;
    const outLen = nextPowerOf2(gadgetPolyLen(this.degree, (inpPoly[0] as bigint[]).length));
    const acc = new Array<bigint>(outLen).fill(0n);
    for (let i = 0; i < this.count; i++) {
      const part = this.subcircuit.evalPoly(field, inpPoly.slice(i * a, (i + 1) * a));
      for (let j = 0; j < outLen; j++) acc[j] = (acc[j] as bigint) + (part[j] as bigint);
    }
    const p = field.modulus;
    return acc.map((x) => x % p);
  }
}

/** The draft's ProveGadget: records each call's inputs as wire values, then evaluates. */
class ProveGadget implements GadgetCall {
  readonly wires: bigint[][];
  #k = 0;

  constructor(
    readonly inner: Gadget,
    calls: number,
    wireSeeds: readonly bigint[],
  ) {
    const p = wirePolyLen(calls);
    this.wires = wireSeeds.map((s) => {
      const w = new Array<bigint>(p).fill(0n);
      w[0] = s;
      return w;
    });
  }

  protected record(inp: readonly bigint[]): void {
    this.#k += 1;
    for (let j = 0; j < inp.length; j++) (this.wires[j] as bigint[])[this.#k] = inp[j] as bigint;
  }

  eval(field: Field, inp: readonly bigint[]): bigint {
    this.record(inp);
    return this.inner.eval(field, inp);
  }
}

/** The draft's QueryGadget: records the wires and answers call `k` with the gadget polynomial at `alpha**k`. */
class QueryGadget extends ProveGadget {
  readonly poly: bigint[];
  readonly #step: number;
  #call = 0;

  constructor(field: Field, inner: Gadget, calls: number, wireSeeds: readonly bigint[], gadgetPoly: readonly bigint[]) {
    super(inner, calls, wireSeeds);
    const p = wirePolyLen(calls);
    const size = nextPowerOf2(gadgetPolyLen(inner.degree, p));
    this.poly = extendValuesToPowerOf2(field, gadgetPoly, size);
    this.#step = size / p;
  }

  override eval(field: Field, inp: readonly bigint[]): bigint {
    super.record(inp);
    this.#call += 1;
    return this.poly[this.#call * this.#step] as bigint;
  }
}

/** A validity circuit (the draft's `Valid`): its gadgets, lengths, encoding and evaluation. */
export interface Valid<M> {
  readonly field: Field;
  readonly gadgets: readonly Gadget[];
  readonly gadgetCalls: readonly number[];
  readonly measLen: number;
  readonly jointRandLen: number;
  readonly evalOutputLen: number;
  readonly outputLen: number;
  /** The parameters a DAP task configuration encodes (draft names, e.g. `max_measurement`). */
  readonly params: Readonly<Record<string, number | bigint>>;
  encode(measurement: M): bigint[];
  eval(meas: readonly bigint[], jointRand: readonly bigint[], numShares: number, gadgets: readonly GadgetCall[]): bigint[];
}

/** FLP-BBCGGI19 for one validity circuit: prove, query and decide. */
export class Flp<M> {
  readonly proveRandLen: number;
  readonly queryRandLen: number;
  readonly proofLen: number;
  readonly verifierLen: number;

  constructor(readonly valid: Valid<M>) {
    this.proveRandLen = valid.gadgets.reduce((n, g) => n + g.arity, 0);
    this.queryRandLen = valid.gadgets.length + (valid.evalOutputLen > 1 ? valid.evalOutputLen : 0);
    this.verifierLen = 1 + valid.gadgets.reduce((n, g) => n + g.arity + 1, 0);
    this.proofLen = valid.gadgets.reduce(
      (n, g, i) => n + g.arity + gadgetPolyLen(g.degree, wirePolyLen(valid.gadgetCalls[i] as number)),
      0,
    );
  }

  /** The wire seeds and the gadget polynomial of each gadget, on the recorded wires. */
  prove(meas: readonly bigint[], proveRand: readonly bigint[], jointRand: readonly bigint[]): bigint[] {
    const { field, gadgets, gadgetCalls } = this.valid;
    const shims: ProveGadget[] = [];
    let offset = 0;
    gadgets.forEach((g, i) => {
      shims.push(new ProveGadget(g, gadgetCalls[i] as number, proveRand.slice(offset, offset + g.arity)));
      offset += g.arity;
    });
    this.valid.eval(meas, jointRand, 1, shims);
    const proof: bigint[] = [];
    shims.forEach((shim, i) => {
      const p = wirePolyLen(gadgetCalls[i] as number);
      for (const w of shim.wires) proof.push(w[0] as bigint);
      const poly = shim.inner.evalPoly(field, shim.wires);
      proof.push(...poly.slice(0, gadgetPolyLen(shim.inner.degree, p)));
    });
    return proof;
  }

  /**
   * A share of the verifier: the reduced circuit output, then per gadget the wire polynomials
   * and the gadget polynomial evaluated at the random point `t`.
   */
  query(meas: readonly bigint[], proof: readonly bigint[], queryRand: readonly bigint[], jointRand: readonly bigint[], numShares: number): bigint[] {
    const { field, gadgets, gadgetCalls, evalOutputLen } = this.valid;
    const mod = field.modulus;
    const shims: QueryGadget[] = [];
    let offset = 0;
    gadgets.forEach((g, i) => {
      const calls = gadgetCalls[i] as number;
      const seeds = proof.slice(offset, offset + g.arity);
      offset += g.arity;
      const length = gadgetPolyLen(g.degree, wirePolyLen(calls));
      shims.push(new QueryGadget(field, g, calls, seeds, proof.slice(offset, offset + length)));
      offset += length;
    });
    const out = this.valid.eval(meas, jointRand, numShares, shims);
    let rand = queryRand.slice();
    let v: bigint;
    if (evalOutputLen > 1) {
      v = out.reduce((acc, o, i) => acc + (rand[i] as bigint) * o, 0n) % mod;
      rand = rand.slice(evalOutputLen);
    } else {
      v = out[0] as bigint;
    }
    const verifier = [v];
    shims.forEach((shim, i) => {
      const t = rand[i] as bigint;
      if (powMod(t, BigInt((shim.wires[0] as bigint[]).length), mod) === 1n) throw new RangeError("test point is a root of unity");
      verifier.push(...lagrangeEvalBatched(field, shim.wires, t));
      verifier.push(...lagrangeEvalBatched(field, [shim.poly], t));
    });
    return verifier;
  }

  /** Whether the combined verifier accepts: circuit output zero, each gadget consistent. */
  decide(verifier: readonly bigint[]): boolean {
    if (verifier[0] !== 0n) return false;
    let offset = 1;
    for (const g of this.valid.gadgets) {
      const wires = verifier.slice(offset, offset + g.arity);
      offset += g.arity;
      if (g.eval(this.valid.field, wires) !== verifier[offset]) return false;
      offset += 1;
    }
    return true;
  }
}

// -- circuits ---------------------------------------------------------------------------------

function bitLength(x: bigint): number {
  return x === 0n ? 0 : x.toString(2).length;
}

/**
 * Bits of `value` with the last weight `maxMeasurement - (2**(bits-1) - 1)` (the draft's
 * `encode_range_checked_int`): only values in `[0, maxMeasurement]` encode.
 */
export function encodeRangeCheckedInt(value: bigint, maxMeasurement: bigint): bigint[] {
  const bits = bitLength(maxMeasurement);
  const restAllOnes = (1n << BigInt(bits - 1)) - 1n;
  const lastWeight = maxMeasurement - restAllOnes;
  const [rest, last] = value <= restAllOnes ? [value, 0n] : [value - lastWeight, 1n];
  const out: bigint[] = [];
  for (let i = 0; i < bits - 1; i++) out.push((rest >> BigInt(i)) & 1n);
  out.push(last);
  return out;
}

/** `sum_{i <= n} (b_i weights)`: the linear inverse of {@link encodeRangeCheckedInt} on shares. */
function decodeRangeCheckedInt(field: Field, encoded: readonly bigint[], maxMeasurement: bigint): bigint {
  const bits = bitLength(maxMeasurement);
  const lastWeight = maxMeasurement - ((1n << BigInt(bits - 1)) - 1n);
  let total = 0n;
  for (let i = 0; i < bits - 1; i++) total += (1n << BigInt(i)) * (encoded[i] as bigint);
  total += lastWeight * (encoded[bits - 1] as bigint);
  return total % field.modulus;
}

/**
 * `sum_i ParallelSum(Mul)(r_i * m, m - 1/s, r_i**2 * m', m' - 1/s, ...)` over chunks: zero when
 * every element is 0 or 1 (the range check of SumVec, Histogram and MultihotCountVec).
 */
function rangeCheck(
  field: Field,
  meas: readonly bigint[],
  jointRand: readonly bigint[],
  numShares: number,
  chunkLength: number,
  calls: number,
  gadget: GadgetCall,
): bigint {
  const p = field.modulus;
  const sharesInv = field.inv(BigInt(numShares));
  let total = 0n;
  for (let i = 0; i < calls; i++) {
    const r = jointRand[i] as bigint;
    let rPower = r;
    const inputs = new Array<bigint>(2 * chunkLength);
    for (let j = 0; j < chunkLength; j++) {
      const index = i * chunkLength + j;
      const m = index < meas.length ? (meas[index] as bigint) : 0n;
      inputs[2 * j] = (rPower * m) % p;
      inputs[2 * j + 1] = (m - sharesInv + p) % p;
      rPower = (rPower * r) % p;
    }
    total += gadget.eval(field, inputs);
  }
  return total % p;
}

/** `value` as an integer in `[0, high]`: numbers (safe integers) and bigints; no booleans. */
function checkInt(name: string, value: unknown, high: bigint): bigint {
  let v: bigint;
  if (typeof value === "bigint") v = value;
  else if (typeof value === "number" && Number.isSafeInteger(value)) v = BigInt(value);
  else throw new MeasurementError(`${name} must be an integer (number or bigint) in [0, ${high}]; got ${describe(value)}`);
  if (v < 0n || v > high) throw new MeasurementError(`${name} must be in [0, ${high}]; got a ${typeof value} outside it`);
  return v;
}

/** The type of a private value, never the value. */
function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "number") {
    if (Number.isSafeInteger(value)) return "a number";
    return Number.isInteger(value) ? "an unsafe integer" : "a non-integer number";
  }
  return typeof value;
}

function checkPositive(name: string, value: number | bigint): void {
  if (typeof value === "number" ? !Number.isSafeInteger(value) || value < 1 : value < 1n) {
    throw new RangeError(`${name} must be a positive integer; got ${typeof value}`);
  }
}

/** `C(x) = x * x - x`: zero iff the count is 0 or 1. */
export class Count implements Valid<number | bigint | boolean> {
  readonly gadgets = [new Mul()];
  readonly gadgetCalls = [1];
  readonly measLen = 1;
  readonly jointRandLen = 0;
  readonly evalOutputLen = 1;
  readonly outputLen = 1;
  readonly params = {};

  constructor(readonly field: Field) {}

  encode(measurement: number | bigint | boolean): bigint[] {
    const value = typeof measurement === "boolean" ? Number(measurement) : measurement;
    return [checkInt("Prio3Count measurement", value, 1n)];
  }

  eval(meas: readonly bigint[], _jointRand: readonly bigint[], _numShares: number, gadgets: readonly GadgetCall[]): bigint[] {
    const m = meas[0] as bigint;
    const p = this.field.modulus;
    return [((gadgets[0] as GadgetCall).eval(this.field, [m, m]) - m + p) % p];
  }
}

/** Each bit of the range-checked encoding through `PolyEval(x**2 - x)`. */
export class Sum implements Valid<number | bigint> {
  readonly gadgets: Gadget[];
  readonly gadgetCalls: number[];
  readonly measLen: number;
  readonly jointRandLen = 0;
  readonly evalOutputLen: number;
  readonly outputLen = 1;
  readonly params: { max_measurement: bigint };
  readonly #max: bigint;

  constructor(
    readonly field: Field,
    maxMeasurement: number | bigint,
  ) {
    checkPositive("max_measurement", maxMeasurement);
    this.#max = BigInt(maxMeasurement);
    if (this.#max >= field.modulus) throw new RangeError(`max_measurement does not fit ${field.name}`);
    const bits = bitLength(this.#max);
    this.gadgets = [new PolyEval([0n, -1n, 1n], bits)];
    this.gadgetCalls = [bits];
    this.measLen = bits;
    this.evalOutputLen = bits;
    this.params = { max_measurement: this.#max };
  }

  encode(measurement: number | bigint): bigint[] {
    return encodeRangeCheckedInt(checkInt("Prio3Sum measurement", measurement, this.#max), this.#max);
  }

  eval(meas: readonly bigint[], _jointRand: readonly bigint[], _numShares: number, gadgets: readonly GadgetCall[]): bigint[] {
    const g = gadgets[0] as GadgetCall;
    return meas.map((b) => g.eval(this.field, [b]));
  }
}

/** The `ParallelSum(Mul(), chunkLength)` gadget over `length` range-checked elements. */
function chunkedRangeCheck(length: number, chunkLength: number): [Gadget[], number[]] {
  checkPositive("chunk_length", chunkLength);
  return [[new ParallelSum(new Mul(), chunkLength)], [Math.ceil(length / chunkLength)]];
}

/** `length` integers in `[0, maxMeasurement]`, each range-checked bit by bit. */
export class SumVec implements Valid<readonly (number | bigint)[]> {
  readonly gadgets: Gadget[];
  readonly gadgetCalls: number[];
  readonly measLen: number;
  readonly jointRandLen: number;
  readonly evalOutputLen = 1;
  readonly outputLen: number;
  readonly params: { length: number; max_measurement: bigint; chunk_length: number };
  readonly #max: bigint;
  readonly #length: number;
  readonly #chunkLength: number;

  constructor(
    readonly field: Field,
    length: number,
    maxMeasurement: number | bigint,
    chunkLength: number,
  ) {
    checkPositive("length", length);
    checkPositive("max_measurement", maxMeasurement);
    this.#max = BigInt(maxMeasurement);
    this.#length = length;
    this.#chunkLength = chunkLength;
    const bits = bitLength(this.#max);
    [this.gadgets, this.gadgetCalls] = chunkedRangeCheck(length * bits, chunkLength);
    this.measLen = length * bits;
    this.outputLen = length;
    this.jointRandLen = this.gadgetCalls[0] as number;
    this.params = { length, max_measurement: this.#max, chunk_length: chunkLength };
  }

  encode(measurement: readonly (number | bigint)[]): bigint[] {
    if (!Array.isArray(measurement) || measurement.length !== this.#length) {
      throw new MeasurementError(`Prio3SumVec measurement must be an array of ${this.#length} integers; got ${describe(measurement)}`);
    }
    const out: bigint[] = [];
    measurement.forEach((v, i) => {
      out.push(...encodeRangeCheckedInt(checkInt(`Prio3SumVec measurement[${i}]`, v, this.#max), this.#max));
    });
    return out;
  }

  eval(meas: readonly bigint[], jointRand: readonly bigint[], numShares: number, gadgets: readonly GadgetCall[]): bigint[] {
    const calls = this.gadgetCalls[0] as number;
    return [rangeCheck(this.field, meas, jointRand, numShares, this.#chunkLength, calls, gadgets[0] as GadgetCall)];
  }
}

/** A one-hot vector: every entry 0 or 1 (range check) and the entries sum to 1. */
export class Histogram implements Valid<number | bigint> {
  readonly gadgets: Gadget[];
  readonly gadgetCalls: number[];
  readonly measLen: number;
  readonly jointRandLen: number;
  readonly evalOutputLen = 2;
  readonly outputLen: number;
  readonly params: { length: number; chunk_length: number };
  readonly #length: number;
  readonly #chunkLength: number;

  constructor(
    readonly field: Field,
    length: number,
    chunkLength: number,
  ) {
    checkPositive("length", length);
    this.#length = length;
    this.#chunkLength = chunkLength;
    [this.gadgets, this.gadgetCalls] = chunkedRangeCheck(length, chunkLength);
    this.measLen = length;
    this.outputLen = length;
    this.jointRandLen = this.gadgetCalls[0] as number;
    this.params = { length, chunk_length: chunkLength };
  }

  encode(measurement: number | bigint): bigint[] {
    const index = Number(checkInt("Prio3Histogram measurement", measurement, BigInt(this.#length - 1)));
    const out = new Array<bigint>(this.#length).fill(0n);
    out[index] = 1n;
    return out;
  }

  eval(meas: readonly bigint[], jointRand: readonly bigint[], numShares: number, gadgets: readonly GadgetCall[]): bigint[] {
    const p = this.field.modulus;
    const calls = this.gadgetCalls[0] as number;
    const range = rangeCheck(this.field, meas, jointRand, numShares, this.#chunkLength, calls, gadgets[0] as GadgetCall);
    const total = meas.reduce((a, b) => a + b, 0n);
    return [range, (((total - this.field.inv(BigInt(numShares))) % p) + p) % p];
  }
}

/**
 * A 0/1 vector with at most `maxWeight` ones: the entries and the bits of the claimed weight
 * are range-checked, and the claimed weight must equal the sum of the entries.
 */
export class MultihotCountVec implements Valid<readonly boolean[]> {
  readonly gadgets: Gadget[];
  readonly gadgetCalls: number[];
  readonly measLen: number;
  readonly jointRandLen: number;
  readonly evalOutputLen = 2;
  readonly outputLen: number;
  readonly params: { length: number; max_weight: bigint; chunk_length: number };
  readonly #length: number;
  readonly #maxWeight: bigint;
  readonly #chunkLength: number;

  constructor(
    readonly field: Field,
    length: number,
    maxWeight: number | bigint,
    chunkLength: number,
  ) {
    checkPositive("length", length);
    checkPositive("max_weight", maxWeight);
    this.#maxWeight = BigInt(maxWeight);
    if (this.#maxWeight > BigInt(length)) throw new RangeError("max_weight exceeds length");
    this.#length = length;
    this.#chunkLength = chunkLength;
    const bitsForWeight = bitLength(this.#maxWeight);
    [this.gadgets, this.gadgetCalls] = chunkedRangeCheck(length + bitsForWeight, chunkLength);
    this.measLen = length + bitsForWeight;
    this.outputLen = length;
    this.jointRandLen = this.gadgetCalls[0] as number;
    this.params = { length, max_weight: this.#maxWeight, chunk_length: chunkLength };
  }

  encode(measurement: readonly boolean[]): bigint[] {
    if (!Array.isArray(measurement) || measurement.length !== this.#length) {
      throw new MeasurementError(`Prio3MultihotCountVec measurement must be an array of ${this.#length} booleans; got ${describe(measurement)}`);
    }
    const counts = measurement.map((x, i): bigint => {
      if (typeof x !== "boolean") throw new MeasurementError(`Prio3MultihotCountVec measurement[${i}] must be a boolean; got ${describe(x)}`);
      return x ? 1n : 0n;
    });
    const weight = counts.reduce((a, b) => a + b, 0n);
    if (weight > this.#maxWeight) {
      throw new MeasurementError(`Prio3MultihotCountVec measurement has more than max_weight (${this.#maxWeight}) entries set`);
    }
    return [...counts, ...encodeRangeCheckedInt(weight, this.#maxWeight)];
  }

  eval(meas: readonly bigint[], jointRand: readonly bigint[], numShares: number, gadgets: readonly GadgetCall[]): bigint[] {
    const p = this.field.modulus;
    const calls = this.gadgetCalls[0] as number;
    const range = rangeCheck(this.field, meas, jointRand, numShares, this.#chunkLength, calls, gadgets[0] as GadgetCall);
    const weight = meas.slice(0, this.#length).reduce((a, b) => a + b, 0n);
    const reported = decodeRangeCheckedInt(this.field, meas.slice(this.#length), this.#maxWeight);
    return [range, (((weight - reported) % p) + p) % p];
  }
}
