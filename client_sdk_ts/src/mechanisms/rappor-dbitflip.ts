/** Device factories of this group (dbitflip, rappor), by mechanism name; their code is in categorical.ts. */
export { RAPPOR_DBITFLIP_FACTORIES } from "./categorical.js";
