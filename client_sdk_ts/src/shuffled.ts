/**
 * What the client needs of shuffled campaigns only (docs/protocol.md, "The sealed envelope"):
 * the shuffle amplification bound, which the policy's central ceiling checks, and a campaign's
 * sealing key, checked when its document is verified. In browsers this is a chunk of its own,
 * loaded with the first shuffled campaign's document; Node's index.ts registers it at import.
 * The cryptography is in sealing.ts, loaded when such a campaign seals its first report.
 */
import type { CampaignDocument } from "./config.js";
import type { Mechanism } from "./mechanisms/types.js";
import { shufflePlanOf } from "./policy.js";
import { plaintextSize, type SealingKey } from "./sealing-size.js";

export { AMPLIFICATION } from "./amplification.js";

/** How a shuffled campaign's payloads are sealed; throws naming what its document or mechanism lacks. */
export function sealingKey(document: CampaignDocument, mechanism: Mechanism): SealingKey {
  shufflePlanOf(document.shuffle, document.name); // Python's parse_campaign: ShufflePlan.from_dict
  const largest = mechanism.largestWirePayload;
  if (document.publicKey === null) throw new Error(`campaign ${document.name} is shuffled but its document has no public_key`);
  if (typeof largest !== "function") {
    throw new Error(
      `campaign ${document.name} is shuffled, and mechanism ${JSON.stringify(document.mechanism.mechanism)} does not bound its wire payloads ` +
        "(largestWirePayload) in this version of ldp-telemetry: its sealed reports cannot be padded to one size",
    );
  }
  const size = plaintextSize(document.name, document.configId, largest.call(mechanism));
  return { publicKey: document.publicKey.key, keyId: document.publicKey.key_id, campaign: document.name, configId: document.configId, size };
}
