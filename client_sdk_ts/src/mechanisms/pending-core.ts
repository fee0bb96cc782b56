/**
 * INTERIM: what the string and record mechanisms need from the core group's memoization and
 * categorical oracles (docs/protocol.md, "Memoization", hr, grr, oue, olh) until those land:
 * the keyed source, the largest-threshold search, Hadamard response with its mixture chain, the
 * GRR/OUE/OLH thresholds (and PCKV's exp_below); then this file goes.
 */
import { hmac } from "@noble/hashes/hmac";
import { sha256 } from "@noble/hashes/sha256";
import { MAX_WORD, Rational, expDouble, expRational, probabilityThreshold, thresholdProbability } from "../rational.js";
import { bernoulli, uniformBelow } from "../samplers.js";
import { HmacWordSource, type WordSource } from "../words.js";

/** The double just below x towards 0 (Python's ``math.nextafter(x, 0.0)``, x > 0). */
export function nextBelow(x: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  view.setBigUint64(0, view.getBigUint64(0) - 1n);
  return view.getFloat64(0);
}

/** A double at most e^x (Python's ``grid.exp_below``). */
export function expBelow(x: number): number {
  return nextBelow(expDouble(x));
}

/** The largest T in [low, high] with ratio(T) <= target, ratio non-decreasing (Python's
 * ``memoization.largest_threshold``). */
export function largestThreshold(
  ratio: (threshold: bigint) => Rational,
  low: bigint,
  high: bigint,
  target: Rational,
): bigint {
  if (ratio(low).cmp(target) > 0) throw new RangeError("no instantaneous randomization reaches the target epsilon");
  if (ratio(high).cmp(target) <= 0) return high;
  while (high - low > 1n) {
    const middle = (low + high) / 2n;
    if (ratio(middle).cmp(target) <= 0) low = middle;
    else high = middle;
  }
  return low;
}

// ---- the keyed source (docs/protocol.md, "Memoization") -----------------------------------------

/** The device's keyed source: a word source per (label, index). */
export interface KeyedSource {
  source(label: string, index: number): WordSource;
}

function len32(text: string): Uint8Array {
  const bytes = new TextEncoder().encode(text);
  const out = new Uint8Array(4 + bytes.length);
  new DataView(out.buffer).setUint32(0, bytes.length, false);
  out.set(bytes, 4);
  return out;
}

/** HmacWordSource(HMAC-SHA256(secret, len32(tag) || len32(scope) || len32(label) || index BE)). */
export class DeviceKeys implements KeyedSource {
  readonly #secret: Uint8Array;
  readonly #scope: string;
  constructor(secret: Uint8Array, scope: string) {
    this.#secret = Uint8Array.from(secret);
    this.#scope = scope;
  }
  source(label: string, index: number): WordSource {
    const index8 = new Uint8Array(8);
    new DataView(index8.buffer).setBigUint64(0, BigInt(index), false);
    const parts = [len32("ldp-telemetry/memo/v1"), len32(this.#scope), len32(label), index8];
    const message = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
    let offset = 0;
    for (const part of parts) {
      message.set(part, offset);
      offset += part.length;
    }
    return new HmacWordSource(hmac(sha256, this.#secret, message));
  }
}

// ---- Hadamard response (docs/protocol.md, hr; Python: client_sdk/mechanisms/hadamard.py) ---------

/** HR over [k] with B blocks at epsilon: the steps SFP's fragment needs. */
export class InterimHr {
  readonly blockSize: number;
  readonly keepThreshold: bigint;
  constructor(
    readonly epsilon: number,
    readonly k: number,
    readonly blocks: number,
  ) {
    this.blockSize = 2 ** Math.ceil(k / blocks).toString(2).length;
    const e = expRational(epsilon);
    this.keepThreshold = probabilityThreshold(e.div(e.add(BigInt(2 * blocks - 1))), "down");
  }

  perturb(values: readonly number[], rng: WordSource): number[] {
    const n = values.length;
    const b = this.blockSize;
    const keep = bernoulli(rng, this.keepThreshold, n);
    const other =
      this.blocks === 1 ? values.map(() => 1) : uniformBelow(rng, 2 * this.blocks - 1, n).map(Number);
    const offsets = rng.words(n);
    return values.map((x, i) => {
      const block = Math.floor(x / (b - 1));
      const row = (x % (b - 1)) + 1;
      const o = other[i] as number;
      const half = keep[i] ? 2 * block : this.blocks === 1 ? o : o + (o >= 2 * block ? 1 : 0);
      let offset = Number((offsets[i] as bigint) & BigInt(b - 1));
      let v = row & offset;
      let p = 0;
      while (v) {
        p ^= 1;
        v &= v - 1;
      }
      if (p !== (half & 1)) offset ^= row & -row;
      return (half >> 1) * b + offset;
    });
  }

  /** (R, M) of the worst output column: R = alpha/beta, M = (c R + k - c)/k, c the fewest
   * symbols whose half-sets hold one output (``HadamardResponse.mixture_column_profile``). */
  mixtureColumnProfile(): [Rational, Rational] {
    const p = thresholdProbability(this.keepThreshold);
    const half = BigInt(this.blockSize / 2);
    const alpha = p.div(half);
    const beta = new Rational(1n).sub(p).div(BigInt(2 * this.blocks - 1) * half);
    const high = alpha.div(beta);
    const c = BigInt(this.fewestHolders());
    const k = BigInt(this.k);
    return [high, high.mul(c).add(k - c).div(k)];
  }

  fewestHolders(): number {
    const b = this.blockSize;
    const sizes = new Set<number>();
    for (let start = 0; start < this.k; start += b - 1) sizes.add(Math.min(b - 1, this.k - start));
    let fewest = this.k;
    for (const rows of sizes) {
      const h = new Array<number>(b).fill(0);
      for (let r = 1; r <= rows; r++) h[r] = 1;
      for (let len = 1; len < b; len <<= 1) {
        for (let i = 0; i < b; i += len << 1) {
          for (let j = i; j < i + len; j++) {
            const a = h[j] as number;
            const c = h[j + len] as number;
            h[j] = a + c;
            h[j + len] = a - c;
          }
        }
      }
      for (const value of h) {
        const count = (rows + value) / 2;
        if (count >= 1 && count <= this.k - 1) fewest = Math.min(fewest, count);
      }
    }
    if (fewest >= this.k) throw new RangeError("no output of the Hadamard response separates two inputs");
    return fewest;
  }
}

/** The mixture chain's keep threshold: the largest lambda with
 * (lambda R + (1-lambda) M)/(lambda + (1-lambda) M) <= e^eps (``MixtureChain``). */
export function mixtureThreshold(profile: [Rational, Rational], epsilon: number): bigint {
  const [r, m] = profile;
  const one = new Rational(1n);
  const ratio = (threshold: bigint): Rational => {
    const lam = thresholdProbability(threshold);
    return lam.mul(r).add(one.sub(lam).mul(m)).div(lam.add(one.sub(lam).mul(m)));
  };
  return largestThreshold(ratio, 0n, MAX_WORD, expRational(epsilon));
}

// ---- the categorical thresholds multi's compact samplers use ----------------------------------

/** GRR's keep threshold e^eps/(e^eps + k - 1), down. */
export function grrKeepThreshold(epsilon: number, k: number): bigint {
  const e = expRational(epsilon);
  return probabilityThreshold(e.div(e.add(BigInt(k - 1))), "down");
}

/** OUE's (p, q) thresholds: p = 1/2 down, q = 1/(e^eps + 1) up. */
export function oueThresholds(epsilon: number): [bigint, bigint] {
  const e = expRational(epsilon);
  return [probabilityThreshold(new Rational(1n, 2n), "down"), probabilityThreshold(new Rational(1n).div(e.add(1n)), "up")];
}

/** OLH's default g = max(2, round(e^eps + 1)) (Python's round: half to even). */
export function olhBuckets(epsilon: number): number {
  const optimal = expDouble(epsilon) + 1;
  const floor = Math.floor(optimal);
  const diff = optimal - floor;
  const rounded = diff > 0.5 || (diff === 0.5 && floor % 2 === 1) ? floor + 1 : floor;
  return Math.max(2, rounded);
}
