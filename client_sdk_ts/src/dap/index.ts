/** DAP-18 on the device: HPKE sealing, the Report a Client uploads, secure-aggregation campaigns and their upload. */
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
export { b64decode, DapCampaign, hpkeConfigFromJson, hpkeConfigToJson, parseDapCampaign, vdafFromConfig } from "./campaign.js";
export { checkDapPolicy, type DapClaim } from "./policy.js";
export { type DapEntry, DapDriver, dapEntry, REPORT_ERRORS, UPLOAD_MEDIA_TYPE, uploadErrors } from "./driver.js";
export { DP_FORMS, dpParameter, type DpParameter, rdpToEpsilon, zcdpEpsilon } from "../zcdp.js";
