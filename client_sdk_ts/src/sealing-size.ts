/**
 * What the client needs of a shuffled campaign's sealing before anything is sealed: the padded
 * plaintext's size and the key (docs/protocol.md, "The sealed envelope"). The cryptography is in
 * sealing.ts, loaded only when a shuffled campaign seals its first report.
 */

/** The plaintext up to its payload's text. */
export function header(campaign: string, configId: string, nonce: string): string {
  return `{"campaign":${JSON.stringify(campaign)},"config_id":${JSON.stringify(configId)},"nonce":"${nonce}","payload":`;
}

/** The bytes every plaintext of a campaign is padded to: header, the largest payload, the brace. */
export function plaintextSize(campaign: string, configId: string, largestPayload: unknown): number {
  const encoder = new TextEncoder();
  return encoder.encode(header(campaign, configId, "0".repeat(32))).length + encoder.encode(JSON.stringify(largestPayload)).length + 1;
}

/** What sealing one campaign's payloads needs (the campaign document's `public_key`). */
export interface SealingKey {
  readonly publicKey: string;
  readonly keyId: string;
  readonly campaign: string;
  readonly configId: string;
  readonly size: number;
}
