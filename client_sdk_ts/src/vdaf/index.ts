/** Prio3 on the device (draft-irtf-cfrg-vdaf-20): sharding and the input-share encodings. */
export { Field, Field64, Field128, nextPowerOf2 } from "./field.js";
export { MeasurementError } from "./flp.js";
export { XofTurboShake128 } from "./xof.js";
export {
  type HelperShare,
  type InputShare,
  type LeaderShare,
  Prio3,
  Prio3Count,
  Prio3Histogram,
  Prio3MultihotCountVec,
  Prio3Sum,
  Prio3SumVec,
  type PublicShare,
} from "./prio3.js";
