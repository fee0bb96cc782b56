/** DAP-18 on the device: HPKE sealing and the Report a Client uploads (no transport yet). */
export { HpkeError, checkSuite, deriveKeyPair, sealBase } from "./hpke.js";
export {
  BatchMode,
  DapCodecError,
  type HpkeCiphertext,
  type HpkeConfig,
  type Report,
  type ReportMetadata,
  Role,
  type TaskConfiguration,
  decodeHpkeConfigList,
  encodeReport,
} from "./messages.js";
export { type DapTask, type PrepareOptions, checkTask, prepareReport, selectHpkeConfig, vdafConfiguration } from "./upload.js";
