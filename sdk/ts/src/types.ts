// The API's types, as api/openapi.yaml describes them (generated into
// openapi.d.ts by `npm run gen`; a test fails when it is stale).
import type { components } from "./openapi.js";

type S = components["schemas"];

export type Sandbox = S["Sandbox"];
export type CreateSandboxRequest = S["CreateSandboxRequest"];
export type Event = S["Event"];
export type ExecRequest = S["ExecRequest"];
export type Run = S["Run"];
export type FileInfo = S["FileInfo"];
export type MkdirRequest = S["MkdirRequest"];
export type Image = S["Image"];
export type WarmPool = S["WarmPool"];
export type Policy = S["Policy"];
export type LimitsRequest = S["LimitsRequest"];
export type NetworkPolicy = S["NetworkPolicy"];
export type SecretGrant = S["SecretGrant"];
export type PortURL = S["PortURL"];
export type Checkpoint = S["Checkpoint"];
export type Process = S["Process"];
export type Health = S["Health"];
export type RequestStatus = S["RequestStatus"];
export type StreamEvent = S["StreamEvent"];
export type SetupRequest = S["SetupRequest"];
export type Rebase = S["Rebase"];
export type Harness = S["Harness"];
export type HarnessSet = S["HarnessSet"];
export type SetupStep = S["SetupStep"];
export type Peer = S["Peer"];
export type AddPeerRequest = S["AddPeerRequest"];
export type RefreshPeerRequest = S["RefreshPeerRequest"];
export type ServiceSpec = S["ServiceSpec"];
export type Service = S["Service"];
export type ServiceExit = S["ServiceExit"];
export type SSHKey = S["SSHKey"];
export type Import = S["Import"];
