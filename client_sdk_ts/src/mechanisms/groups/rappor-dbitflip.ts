/** dbitflip and rappor (their code is in categorical.ts; a page of the oracles loads neither). */
export { RAPPOR_DBITFLIP_FACTORIES as FACTORIES } from "../categorical.js";
