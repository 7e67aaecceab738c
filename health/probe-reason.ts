// Why a probe ended the way it did. These strings become the Healthy condition's reason, so
// they are CamelCase and stable.
export const ProbeReason = {
  ProbeSucceeded: 'ProbeSucceeded',
  /** The proxy refused the TCP connection. */
  ConnectionRefused: 'ConnectionRefused',
  /** The proxy address could not be resolved or routed to. */
  ProxyUnreachable: 'ProxyUnreachable',
  /** No complete answer within timeoutSeconds (connect, CONNECT, TLS, headers and body together). */
  ProxyTimeout: 'ProxyTimeout',
  /** The proxy accepted TCP but could not reach the target: non-200 to CONNECT, or it closed/reset the connection. */
  TunnelFailed: 'TunnelFailed',
  /** The proxy answered 407: it requires credentials the probe lacks, or has them wrong. */
  ProxyAuthenticationRequired: 'ProxyAuthenticationRequired',
  /** The target answered (through the proxy) with a status not in expectedStatusCodes. */
  UnexpectedStatus: 'UnexpectedStatus',
  /**
   * The proxy's address (or one its name resolved to) is where the caller's rule forbids
   * probing (External endpoints in loopback, metadata ... ranges): no connection was made.
   */
  EndpointRefused: 'EndpointRefused',
  /** Anything else (TLS failure towards the target, protocol errors ...); the message has the detail. */
  ProbeError: 'ProbeError',
} as const;

export type ProbeReason = (typeof ProbeReason)[keyof typeof ProbeReason];

/** The result of one probe, before threshold logic. */
export interface ProbeOutcome {
  success: boolean;
  reason: ProbeReason;
  message: string;
  /** Wall time of the whole probe. */
  durationMillis: number;
}
