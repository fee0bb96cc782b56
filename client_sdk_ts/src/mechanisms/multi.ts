/**
 * Multidimensional records (``multi``): SPL (the budget split over the attributes), SMP (one
 * sampled attribute, or one marginal table with ``marginals``) and RS+FD (one sampled attribute,
 * fake values for the others; Arcolezi et al., CIKM 2021), each unit reported by its oracle's
 * compact sampler (docs/protocol.md, "Structures"; Python: client_sdk/mechanisms/multi.py).
 */
import { deviceChoice } from "../memo-chain.js";
import { Rational, expDouble, thresholdProbability } from "../rational.js";
import { bernoulliBytes, bernoulliLazy, randomBits, uniformBelow32, uniformBelowBits } from "../samplers.js";
import { base64Url, bitsText, widestInt } from "../wire.js";
import { type Attribute, encodeRecord, parseAttributes } from "./attributes.js";
import type { WordSource } from "../words.js";
import { HASH_PRIME, UnaryEncoding, keepOrOtherCompact, keepThreshold, localHash } from "./categorical.js";
import { log } from "./correctly-rounded.js";
import {
  checkKeys,
  configEpsilon,
  typeName,
  widestPayload,
  wordSource,
} from "./fields.js";
import type { Mechanism, MechanismConfig, PerturbOptions } from "./types.js";

const PROTOCOLS = ["spl", "smp", "rsfd"];
const TABLE_ORACLES = ["grr", "oue", "olh"];
const FIELDS = ["epsilon", "attributes", "protocol"];

/** One unit's oracle as its compact sampler needs it. */
type Oracle =
  | { readonly name: "grr"; readonly k: number; readonly keep: bigint }
  | { readonly name: "oue"; readonly k: number; readonly p: bigint; readonly q: bigint }
  | { readonly name: "olh"; readonly k: number; readonly g: number; readonly keep: bigint };

/** A unit's report: GRR's value, OUE's packed row, or OLH's (seed, y). */
type UnitReport = number | Uint8Array | { readonly seed: bigint; readonly y: number };

/** SPL and RS+FD: one report per unit in order; SMP: the unit and its report. */
export type MultiReport = readonly UnitReport[] | readonly [number, UnitReport];

/** A record: attribute -> label (or index, for an attribute without labels), or the indices in
 * the config's attribute order. */
export type MultiRecord = Readonly<Record<string, string | number>> | readonly number[];

/** OLH's g when a table's config does not carry it: max(2, round(e^eps + 1)), Python's round
 * (half to even). */
function olhBuckets(epsilon: number): number {
  const optimal = expDouble(epsilon) + 1;
  const floor = Math.floor(optimal);
  const rest = optimal - floor;
  return Math.max(2, rest > 0.5 || (rest === 0.5 && floor % 2 === 1) ? floor + 1 : floor);
}

function oracle(name: string, epsilon: number, k: number): Oracle {
  if (name === "grr") return { name, k, keep: keepThreshold(epsilon, k) };
  if (name === "oue") {
    const [p, q] = new UnaryEncoding("oue", epsilon, k).thresholds;
    return { name, k, p, q };
  }
  const g = olhBuckets(epsilon);
  return { name: "olh", k, g, keep: keepThreshold(epsilon, g) };
}

/** (p*, q*) as floats, as the Python oracles give them. */
function supportProbabilities(o: Oracle): [number, number] {
  if (o.name === "grr") {
    const p = thresholdProbability(o.keep);
    return [p.toNumber(), new Rational(1n).sub(p).div(BigInt(o.k - 1)).toNumber()];
  }
  if (o.name === "oue") return [thresholdProbability(o.p).toNumber(), thresholdProbability(o.q).toNumber()];
  throw new Error("olh is chosen only through table_oracles");
}

/** k Var* + (1 - p* - q*)/(p* - q*) at n = 1 (``FrequencyOracle.total_variance``). */
function totalVariance(o: Oracle): number {
  const [p, q] = supportProbabilities(o);
  return o.k * ((q * (1 - q)) / (p - q) ** 2) + (1 - p - q) / (p - q);
}

/** GRR or OUE at epsilon over k, the smaller total variance (ties to GRR). */
function bestOracle(epsilon: number, k: number): Oracle {
  const grr = oracle("grr", epsilon, k);
  const oue = oracle("oue", epsilon, k);
  return totalVariance(oue) < totalVariance(grr) ? oue : grr;
}

/** RS+FD's calibrated epsilon': the largest (to 1e-12 relative) whose whole-tuple ratio
 * sum k_j p*_j / sum k_j q*_j is at most e^epsilon (``calibrate_rsfd``). */
function calibrateRsfd(epsilon: number, ks: readonly number[]): number {
  const target = expDouble(epsilon);
  const worst = (epsilonPrime: number): number => {
    let high = 0;
    let low = 0;
    for (const k of ks) {
      const [p, q] = supportProbabilities(oracle("grr", epsilonPrime, k));
      high += k * p;
      low += k * q;
    }
    return high / low;
  };
  let low = epsilon / 2;
  // glibc's expm1 is fdlibm's, as V8's Math.expm1; exp and log correctly rounded as glibc's
  let high = log(ks.length * Math.expm1(epsilon) + 1) + 1.0;
  for (let i = 0; i < 200; i++) {
    const mid = (low + high) / 2;
    if (worst(mid) <= target) low = mid;
    else high = mid;
    if (high - low <= 1e-12 * high) break;
  }
  return low;
}

export class Multi implements Mechanism<MultiRecord, MultiReport> {
  readonly name = "multi";
  readonly valueKind = "record";
  readonly epsilon: number;
  readonly protocol: "spl" | "smp" | "rsfd";
  readonly attributes: readonly Attribute[];
  /** Each unit's attribute indices: one attribute each, or one marginal table each. */
  readonly units: readonly (readonly number[])[];
  readonly oracles: readonly Oracle[];
  /** SMP's and RS+FD's unit comes from the device's keyed source (Python:
   * ``uses_device_choices``; a simulation without keys draws a unit per report). */
  readonly usesDeviceChoices = true;

  constructor(config: MechanismConfig) {
    checkKeys(config, "multi", FIELDS, ["marginals", "table_oracles"]);
    this.epsilon = configEpsilon(config);
    const protocol = config.protocol;
    if (typeof protocol !== "string" || !PROTOCOLS.includes(protocol)) {
      throw new RangeError(`protocol must be one of ${PROTOCOLS.join(", ")}; got ${typeName(protocol)}`);
    }
    this.protocol = protocol as "spl" | "smp" | "rsfd";
    this.attributes = parseAttributes(config.attributes);
    const names = this.attributes.map((a) => a.name);
    const ks = this.attributes.map((a) => a.k);
    const marginals = config.marginals;
    if (marginals === undefined || marginals === null) {
      this.units = ks.map((_, j) => [j]);
    } else {
      if (this.protocol !== "smp") throw new RangeError(`marginals needs protocol "smp"; got ${this.protocol}`);
      if (!Array.isArray(marginals) || marginals.length === 0) {
        throw new TypeError(`marginals must be a list of tables (lists of attribute names); got ${typeName(marginals)}`);
      }
      this.units = marginals.map((table: unknown, index) => {
        if (!Array.isArray(table) || table.length === 0 || !table.every((n) => typeof n === "string" && names.includes(n))) {
          throw new RangeError(`marginals[${index}] must list attribute names of config.attributes`);
        }
        return (table as string[]).map((n) => names.indexOf(n));
      });
    }
    const sizes = this.units.map((unit) => unit.reduce((s, a) => s * (ks[a] as number), 1));
    const tableOracles = config.table_oracles;
    if (tableOracles !== undefined && tableOracles !== null) {
      if (marginals === undefined || marginals === null) throw new RangeError("table_oracles needs marginals");
      if (
        !Array.isArray(tableOracles) ||
        tableOracles.length !== this.units.length ||
        !tableOracles.every((n) => typeof n === "string" && TABLE_ORACLES.includes(n))
      ) {
        throw new RangeError(`table_oracles must name one of grr, oue, olh per table; got ${typeName(tableOracles)}`);
      }
      this.oracles = (tableOracles as string[]).map((n, j) => oracle(n, this.epsilon, sizes[j] as number));
    } else if (marginals !== undefined && marginals !== null) {
      throw new RangeError("table_oracles is missing (the canonical config carries it with marginals)");
    } else if (this.protocol === "spl") {
      this.oracles = ks.map((k) => bestOracle(this.epsilon / ks.length, k));
    } else if (this.protocol === "smp") {
      this.oracles = sizes.map((size) => bestOracle(this.epsilon, size));
    } else {
      const epsilonPrime = calibrateRsfd(this.epsilon, ks);
      this.oracles = ks.map((k) => oracle("grr", epsilonPrime, k));
    }
  }

  /** Unit j's cell of a record: row-major over the unit's attributes. */
  #cell(x: readonly number[], j: number): number {
    return (this.units[j] as number[]).reduce((cell, a) => cell * (this.attributes[a] as Attribute).k + (x[a] as number), 0);
  }

  perturb(values: readonly MultiRecord[], options?: PerturbOptions): MultiReport[] {
    if (!Array.isArray(values)) throw new TypeError(`values must be an array of records; got ${typeName(values)}`);
    const x = values.map((record, position) => encodeRecord(this.attributes, record, position));
    const rng = wordSource(options);
    const n = x.length;
    if (this.protocol === "spl") {
      const columns = this.oracles.map((o, j) => compact(o, x.map((row) => row[j] as number), rng));
      return x.map((_, i) => columns.map((column) => column[i] as UnitReport));
    }
    const u = this.units.length;
    const keys = options?.keys;
    const sampled =
      keys !== undefined ? new Array<number>(n).fill(deviceChoice(keys, "multi:unit", u)) : uniformBelow32(rng, u, n);
    const out: UnitReport[][] = x.map(() => []);
    for (let j = 0; j < u; j++) {
      const rows = sampled.flatMap((s, i) => (s === j ? [i] : []));
      if (rows.length > 0) {
        const reports = compact(this.oracles[j] as Oracle, rows.map((i) => this.#cell(x[i] as number[], j)), rng);
        rows.forEach((i, r) => {
          (out[i] as UnitReport[])[j] = reports[r] as UnitReport;
        });
      }
      if (this.protocol === "rsfd") {
        const fake = sampled.flatMap((s, i) => (s !== j ? [i] : []));
        const drawn = uniformBelow32(rng, (this.attributes[j] as Attribute).k, fake.length);
        fake.forEach((i, r) => {
          (out[i] as UnitReport[])[j] = drawn[r] as number;
        });
      }
    }
    if (this.protocol === "smp") return out.map((reports, i) => [sampled[i] as number, reports[sampled[i] as number] as UnitReport]);
    return out;
  }

  /** The widest payload (Python: `largest_wire_payload`): every unit's widest report, or
   * SMP's widest unit and its widest report. */
  largestWirePayload(): unknown {
    const reports = this.oracles.map(largestUnitPayload);
    return this.protocol === "smp" ? [widestInt(0, this.units.length), widestPayload(reports)] : reports;
  }

  toWire(reports: readonly MultiReport[]): unknown[] {
    return reports.map((report) => {
      if (this.protocol === "smp") {
        const [unit, unitReport] = report as readonly [number, UnitReport];
        return [unit, unitPayload(unitReport)];
      }
      return (report as readonly UnitReport[]).map(unitPayload);
    });
  }
}

function largestUnitPayload(o: Oracle): unknown {
  if (o.name === "grr") return widestInt(0, o.k);
  if (o.name === "oue") return bitsText(o.k);
  return { seed: "0".repeat(16), y: widestInt(0, o.g) };
}

function unitPayload(report: UnitReport): unknown {
  if (typeof report === "number") return report;
  if (report instanceof Uint8Array) return base64Url(report);
  return { seed: report.seed.toString(16).padStart(16, "0"), y: report.y };
}

/** A unit's reports from its oracle's compact sampler (``perturb_compact``). */
function compact(o: Oracle, values: readonly number[], rng: WordSource): UnitReport[] {
  if (o.name === "grr") return keepOrOtherCompact(rng, values, o.keep, o.k);
  if (o.name === "olh") {
    // the seed (a - 1)·P + b from a - 1 uniform on [0, P - 1) and b on [0, P)
    const aLessOne = uniformBelowBits(rng, HASH_PRIME - 1, values.length);
    const b = uniformBelowBits(rng, HASH_PRIME, values.length);
    const seeds = values.map((_, i) => BigInt(aLessOne[i] as number) * BigInt(HASH_PRIME) + BigInt(b[i] as number));
    const ys = keepOrOtherCompact(
      rng,
      values.map((x, i) => localHash(seeds[i] as bigint, x, o.g)),
      o.keep,
      o.g,
    );
    return values.map((_, i) => ({ seed: seeds[i] as bigint, y: ys[i] as number }));
  }
  // OUE: every row's bytes by bernoulli_bytes at q, pad bits cleared, then bit x replaced by one
  // fair bit (p = 1/2 exactly) or bernoulli_lazy(p)
  const size = Math.ceil(o.k / 8);
  const block = bernoulliBytes(rng, o.q, values.length * size);
  const bits = o.p === 1n << 63n ? randomBits(rng, values.length) : bernoulliLazy(rng, o.p, values.length);
  return values.map((x, i) => {
    const row = Uint8Array.from(block.slice(i * size, (i + 1) * size));
    if (o.k % 8) row[size - 1] = (row[size - 1] as number) & ((0xff << (8 * size - o.k)) & 0xff);
    const mask = 0x80 >> (x & 7);
    row[x >> 3] = ((row[x >> 3] as number) & ~mask) | (bits[i] ? mask : 0);
    return row;
  });
}
